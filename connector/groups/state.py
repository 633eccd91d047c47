"""The progress of a reader group: a plain value and pure functions over it.

One implementation, three hosts: standalone reader groups keep it in the
store, the Flink adapter in Flink state, the Spark adapter in its offsets.

A segment of the group is in exactly one of three places:

- ``cursors``: readable now (its predecessors are finished), with the offset
  reached and the segment watermark there;
- ``waiting``: a successor some of whose predecessors are unfinished, with its
  initial watermark (creation time - 1);
- ``finished``: read to its end (or to the end cut).

The group watermark is the minimum over every unfinished segment (cursors and
waiting). No event after the cursors, nor in a waiting segment, has an
ingestion time at or before it.

Beside its ingestion watermark each segment carries the event time its
writers asserted there (seed 002; :attr:`SegmentCursor.event_time`): a
time, :data:`NO_WRITER` when no writer holds it (it holds no group back), or
None while not known (a position not read since it was placed: it holds the
group back). The group's event time is the same minimum over the same
segments (:func:`group_event_time`): the rule is :func:`least_unfinished`,
written once for both (:class:`GroupTime` says which time each takes, and
:class:`~connector.groups.tracking.GroupTimeTracker` keeps it as positions
change). Unlike ingestion watermarks a segment's event time may fall (a
writer joining with an assertion below the others); readers never let the
watermarks they yield fall.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from connector.errors import FailedPreconditionError, InvalidArgumentError
from connector.model import initial_watermark
from connector.timestamps import END_OF_TIME

__all__ = [
    "INGESTION_WATERMARK",
    "NO_WRITER",
    "WRITERS_EVENT_TIME",
    "GroupState",
    "GroupTime",
    "ReportedPosition",
    "SegmentCursor",
    "Successor",
    "WaitingSegment",
    "advance",
    "advance_all",
    "finish",
    "finish_all",
    "group_event_time",
    "group_watermark",
    "least_event_time",
    "least_unfinished",
    "plan_cut",
    "stream_cut",
    "unassigned_oldest_first",
    "watermark_after",
    "writers_event_time",
]

#: A segment's event time when no active writer holds it: it holds no group back.
NO_WRITER = END_OF_TIME


def writers_event_time(store_value: int | None) -> int:
    """A segment's event time as the group keeps it, from the store's (None: no active writer)."""
    return NO_WRITER if store_value is None else store_value


@dataclass(frozen=True)
class SegmentCursor:
    """A readable segment: the offset reached and the watermark that holds there.

    ``end`` is where reading stops (from an end cut); None reads to the seal.
    ``event_time`` is the writers' event time at the offset (see the module
    docstring): a time, :data:`NO_WRITER`, or None while not known.
    """

    offset: int
    watermark: int
    end: int | None = None
    event_time: int | None = None

    @property
    def at_end_cut(self) -> bool:
        """Whether the end cut is reached."""
        return self.end is not None and self.offset >= self.end


@dataclass(frozen=True)
class WaitingSegment:
    """A successor waiting for ``waiting_for`` to finish; it starts at offset 0.

    ``event_time`` is the least event time its finished predecessors ended
    with (:data:`NO_WRITER` before any finished): a successor starts with
    the writers its predecessors had at their seal.
    """

    watermark: int
    waiting_for: frozenset[str]
    event_time: int | None = NO_WRITER


@dataclass(frozen=True)
class Successor:
    """What :func:`finish` needs to know of a successor segment."""

    segment: str
    predecessors: tuple[str, ...]
    creation_time: int


#: A reported position of a segment: ``(offset, watermark, event_time)`` (see :func:`advance`).
ReportedPosition = tuple[int, int, int | None]


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class GroupState:
    """Which segments a group has read how far; see the module docstring.

    ``end_cut`` bounds the group: a segment listed there stops at its offset,
    and only segments listed there, or leading to one, are ever read.
    """

    cursors: Mapping[str, SegmentCursor] = field(default_factory=dict)
    waiting: Mapping[str, WaitingSegment] = field(default_factory=dict)
    finished: frozenset[str] = frozenset()
    end_cut: Mapping[str, int] | None = None
    bounded_to: frozenset[str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cursors", _frozen(self.cursors))
        object.__setattr__(self, "waiting", _frozen(self.waiting))
        if self.end_cut is not None:
            object.__setattr__(self, "end_cut", _frozen(self.end_cut))

    @classmethod
    def starting_at(
        cls,
        cut: Mapping[str, int],
        watermarks: Mapping[str, int],
        end_cut: Mapping[str, int] | None = None,
        bounded_to: Iterable[str] | None = None,
        event_times: Mapping[str, int] | None = None,
    ) -> GroupState:
        """A group about to read from ``cut`` (segment -> offset).

        ``watermarks`` gives the watermark at each cut offset; a pessimistic
        one (the segment's creation time - 1) is always safe. ``bounded_to``
        lists the segments an end cut allows (those in it and their ancestors).
        ``event_times`` gives the writers' event time at the offsets known
        (the store's at a tail); the others are not known until read.
        """
        missing = sorted(set(cut) - set(watermarks))
        if missing:
            msg = f"no watermark given for segments {missing!r} of the start cut"
            raise InvalidArgumentError(msg)
        ends = end_cut or {}
        known = event_times or {}
        cursors = {
            s: SegmentCursor(offset, watermarks[s], ends.get(s), known.get(s))
            for s, offset in cut.items()
        }
        return cls(
            cursors=cursors,
            end_cut=end_cut,
            bounded_to=None if bounded_to is None else frozenset(bounded_to),
        )

    @property
    def is_done(self) -> bool:
        """Whether every segment is finished: nothing more will be read."""
        return not self.cursors and not self.waiting

    # --- JSON -----------------------------------------------------------------

    def to_json(self) -> str:
        """A JSON form that :meth:`from_json` reads back to an equal value."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def to_dict(self, *, with_cursors: bool = True) -> dict[str, Any]:
        """The JSON-compatible dict behind :meth:`to_json`.

        Without ``with_cursors`` it leaves the readable segments out, for a
        form that keeps them otherwise (:mod:`connector.groups.compact`).
        """
        tables = {
            "waiting": {
                s: [w.watermark, sorted(w.waiting_for), w.event_time]
                for s, w in self.waiting.items()
            },
            "finished": sorted(self.finished),
            "end_cut": None if self.end_cut is None else dict(self.end_cut),
            "bounded_to": None if self.bounded_to is None else sorted(self.bounded_to),
        }
        if not with_cursors:
            return tables
        cursors = {s: [c.offset, c.watermark, c.end, c.event_time] for s, c in self.cursors.items()}
        return {"cursors": cursors, **tables}

    @classmethod
    def from_json(cls, text: str) -> GroupState:
        """Reads :meth:`to_json`'s output; raises InvalidArgumentError naming what is wrong."""
        try:
            return cls.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError) as error:
            msg = f"invalid group state JSON {text!r:.200}: {error}"
            raise InvalidArgumentError(msg) from None

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], cursors: Mapping[str, SegmentCursor] | None = None
    ) -> GroupState:
        """The inverse of :meth:`to_dict`; reads the form before event times too.

        ``cursors``, when given, are the readable segments, read from another
        form (``data`` then need not hold them).
        """
        if cursors is None:
            cursors = {s: SegmentCursor(*c) for s, c in data["cursors"].items()}
        bounded = data.get("bounded_to")
        return cls(
            cursors=cursors,
            waiting={
                s: WaitingSegment(w[0], frozenset(w[1]), *w[2:]) for s, w in data["waiting"].items()
            },
            finished=frozenset(data["finished"]),
            end_cut=data.get("end_cut"),
            bounded_to=None if bounded is None else frozenset(bounded),
        )


def least_unfinished(
    of_cursors: Iterable[int | None], of_waiting: Iterable[int | None]
) -> int | None:
    """The group rule: the least over every unfinished segment, readable and waiting.

    END_OF_TIME when there is none; None when one is not known (it holds
    the group back at no known time).
    """
    least = END_OF_TIME
    for value in (*of_cursors, *of_waiting):
        if value is None:
            return None
        least = min(least, value)
    return least


def least_event_time(*event_times: int | None) -> int | None:
    """The least of some event times; None when one is not known."""
    return least_unfinished(event_times, ())


@dataclass(frozen=True)
class GroupTime:
    """Which of its segments' times a group's time is made of, and how a reader's count.

    ``of_cursor`` gives a readable segment's time as the state holds it,
    ``with_fresher`` its time given a reader's newer value of it (from a
    position past the state's), ``of_waiting`` a waiting segment's. The
    group's time is :func:`least_unfinished` of them (:meth:`least`):
    :data:`INGESTION_WATERMARK` makes :func:`group_watermark`,
    :data:`WRITERS_EVENT_TIME` :func:`group_event_time`.
    """

    name: str
    of_cursor: Callable[[SegmentCursor], int | None]
    with_fresher: Callable[[SegmentCursor, int | None], int | None]
    of_waiting: Callable[[WaitingSegment], int | None]

    def least(
        self, state: GroupState, fresher: Mapping[str, int | None] | None = None
    ) -> int | None:
        """The group's time at ``state``, with a reader's newer values (``fresher``) counted."""
        fresher = fresher or {}
        return least_unfinished(
            (
                self.with_fresher(c, fresher[s]) if s in fresher else self.of_cursor(c)
                for s, c in state.cursors.items()
            ),
            (self.of_waiting(w) for w in state.waiting.values()),
        )

    def __repr__(self) -> str:
        return f"GroupTime({self.name!r})"


#: The group watermark: the segments' ingestion watermarks; a reader's newer one counts when higher.
INGESTION_WATERMARK = GroupTime(
    "ingestion watermark",
    of_cursor=lambda cursor: cursor.watermark,
    with_fresher=lambda cursor, fresher: max(cursor.watermark, fresher),  # type: ignore[type-var]
    of_waiting=lambda waiting: waiting.watermark,
)

#: The group's event time: the segments' writers' event times; a reader's newer one counts instead.
WRITERS_EVENT_TIME = GroupTime(
    "writers' event time",
    of_cursor=lambda cursor: cursor.event_time,
    with_fresher=lambda cursor, fresher: fresher,
    of_waiting=lambda waiting: waiting.event_time,
)


def group_watermark(state: GroupState, fresher: Mapping[str, int] | None = None) -> int:
    """The minimum watermark over every unfinished segment; END_OF_TIME when done.

    ``fresher`` maps readable segments to watermarks newer than the state's
    (a reader's own positions); the higher of the two counts.
    """
    watermark = INGESTION_WATERMARK.least(state, fresher)
    assert watermark is not None  # every segment has an ingestion watermark
    return watermark


def group_event_time(
    state: GroupState, fresher: Mapping[str, int | None] | None = None
) -> int | None:
    """The writers' event time of the group: the least over every unfinished segment.

    :data:`NO_WRITER` (END_OF_TIME) when no segment's writers hold it, or the
    group is done; None while a segment's is not known. ``fresher`` maps
    readable segments to event times at newer positions than the state's
    (a reader's own), which count instead.
    """
    return WRITERS_EVENT_TIME.least(state, fresher)


def watermark_after(
    read_watermark: int, last_taken_ingestion_time: int | None, took_all: bool
) -> int | None:
    """The segment watermark that holds after taking events from one store read.

    When every event the read returned was taken (or it returned none), the
    read's own watermark holds. Otherwise the segment's events are ingested
    in order, so the last taken event's ingestion time - 1 is safe: no event
    after it was ingested at or before that. None when nothing was taken and
    events remain: the watermark stays where it was.
    """
    if took_all:
        return read_watermark
    if last_taken_ingestion_time is None:
        return None
    return last_taken_ingestion_time - 1


def advance(
    state: GroupState,
    segment: str,
    offset: int,
    watermark: int,
    event_time: int | None = None,
) -> GroupState:
    """Records that ``segment`` was read up to ``offset``, where ``watermark`` holds.

    Offsets and watermarks never step back: a stale report changes nothing.
    ``event_time`` is the writers' there (None: not known): a report at a
    later offset replaces the cursor's, one at its offset replaces it when
    known, a stale one changes nothing (event times may fall, so no maximum).
    """
    return advance_all(state, {segment: (offset, watermark, event_time)})


def advance_all(state: GroupState, positions: Mapping[str, ReportedPosition]) -> GroupState:
    """:func:`advance` of every segment of ``positions`` at once.

    ``positions`` maps segments to ``(offset, watermark, event_time)``. The
    result is the one :func:`advance` gives segment after segment, but the
    cursor table is copied once, and only when a cursor moved: the same
    ``state`` is returned when none did. Cursors that did not move are the
    same objects in the result.

    Raises:
        FailedPreconditionError: a segment of ``positions`` is not readable
            (finished, waiting or unknown), naming it; nothing is recorded.
    """
    moved: dict[str, SegmentCursor] = {}
    for segment, (offset, watermark, event_time) in positions.items():
        cursor = state.cursors.get(segment)
        if cursor is None:
            msg = (
                f"segment {segment!r} is not readable in this group (finished, waiting or unknown)"
            )
            raise FailedPreconditionError(msg)
        updated = _advanced(cursor, offset, watermark, event_time)
        if updated is not cursor:
            moved[segment] = updated
    if not moved:
        return state
    return replace(state, cursors={**state.cursors, **moved})


def _advanced(
    cursor: SegmentCursor, offset: int, watermark: int, event_time: int | None
) -> SegmentCursor:
    """The cursor after a report (see :func:`advance`); ``cursor`` itself when it did not move."""
    if offset > cursor.offset or (offset == cursor.offset and event_time is not None):
        event_time_there = event_time
    else:
        event_time_there = cursor.event_time
    offset = max(cursor.offset, offset)
    watermark = max(cursor.watermark, watermark)
    before = (cursor.offset, cursor.watermark, cursor.event_time)
    if (offset, watermark, event_time_there) == before:
        return cursor
    return SegmentCursor(offset, watermark, cursor.end, event_time_there)


def finish(state: GroupState, segment: str, successors: Iterable[Successor] = ()) -> GroupState:
    """Marks ``segment`` finished and brings in its successors.

    A successor becomes readable (offset 0, watermark creation time - 1) only
    when every one of its predecessors is finished, so events of one routing
    key are read in order across splits and merges. It starts with the
    least event time its predecessors ended with (their writers are its
    writers at its start). In a bounded group, successors outside
    ``bounded_to`` are not read.
    """
    return finish_all(state, {segment: successors})


def finish_all(state: GroupState, segments: Mapping[str, Iterable[Successor]]) -> GroupState:
    """:func:`finish` of every segment of ``segments`` (segment -> its successors), in order.

    The result is the one :func:`finish` gives segment after segment, but
    the tables are copied once, and each finished segment costs what its
    successors and the segments waiting for it cost, not the whole group.
    The same ``state`` is returned when every segment was finished already.

    Raises:
        FailedPreconditionError: a segment is neither finished nor readable,
            naming it; nothing is recorded.
    """
    todo = {s: successors for s, successors in segments.items() if s not in state.finished}
    if not todo:
        return state
    cursors = dict(state.cursors)
    waiting = dict(state.waiting)
    finished = set(state.finished)
    waiters = _waiters(waiting)
    for segment, successors in todo.items():
        if segment in finished:
            continue
        if segment not in cursors:
            msg = f"segment {segment!r} cannot finish: it is not readable in this group"
            raise FailedPreconditionError(msg)
        ended_with = cursors.pop(segment).event_time
        finished.add(segment)
        for successor in successors:
            name = successor.segment
            if name in finished or name in cursors:
                continue
            if state.bounded_to is not None and name not in state.bounded_to:
                continue
            known = waiting.get(name)
            initial = initial_watermark(successor.creation_time)
            waiting_for = (
                known.waiting_for if known else frozenset(successor.predecessors)
            ) - finished
            event_time = least_event_time(known.event_time if known else NO_WRITER, ended_with)
            if waiting_for:
                waiting[name] = WaitingSegment(initial, waiting_for, event_time)
                for predecessor in waiting_for:
                    waiters.setdefault(predecessor, set()).add(name)
            else:
                waiting.pop(name, None)
                end = None if state.end_cut is None else state.end_cut.get(name)
                cursors[name] = SegmentCursor(0, initial, end, event_time)
        for name in waiters.pop(segment, ()):
            entry = waiting.get(name)
            if entry is not None and segment in entry.waiting_for:
                waiting[name] = replace(entry, waiting_for=entry.waiting_for - {segment})
    return replace(state, cursors=cursors, waiting=waiting, finished=frozenset(finished))


def _waiters(waiting: Mapping[str, WaitingSegment]) -> dict[str, set[str]]:
    """Which waiting segments each predecessor holds back."""
    waiters: dict[str, set[str]] = {}
    for name, entry in waiting.items():
        for predecessor in entry.waiting_for:
            waiters.setdefault(predecessor, set()).add(name)
    return waiters


def stream_cut(state: GroupState) -> dict[str, int]:
    """The offsets of every readable segment: where a reset to this state resumes."""
    return {segment: cursor.offset for segment, cursor in state.cursors.items()}


def unassigned_oldest_first(state: GroupState, assigned: Iterable[str]) -> list[str]:
    """Readable segments nobody holds, oldest watermark first (PDP 26)."""
    taken = set(assigned)
    free = [s for s in state.cursors if s not in taken]
    return sorted(free, key=lambda s: (state.cursors[s].watermark, s))


def plan_cut(state: GroupState, reachable: Mapping[str, int]) -> dict[str, int]:
    """The next cut: each readable segment's offset moved to ``reachable`` (an event boundary).

    Never moves a cursor back nor past its end cut.
    """
    planned = {}
    for segment, cursor in state.cursors.items():
        target = max(cursor.offset, reachable.get(segment, cursor.offset))
        if cursor.end is not None:
            target = min(target, max(cursor.end, cursor.offset))
        planned[segment] = target
    return planned
