"""Stream cuts: where a read starts and where a bounded read ends, and what they resolve to.

One :class:`StreamCut` names both ends of a read (the Pravega connector's
``StreamCut``, PyFlink's ``OffsetsInitializer``): the streams' first
readable data, their tails, explicit offsets, or a time (Kafka's offsets by
timestamp). :func:`start_state` resolves a start cut against the store into
the group state a read begins with, :func:`state_at_time` a time into the
state of every segment there. Either asks the store a few calls whatever
the number of segments: a ``DescribeStream`` per stream, then per round of
successors one ``DescribeTails`` and, for a time, one ``PlanReads``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from connector._wire import MAX_ITEMS_PER_CALL
from connector.client.connection import StoreClient
from connector.errors import InvalidArgumentError, TidemarkError
from connector.groups.state import (
    GroupState,
    ReportedPosition,
    Successor,
    advance_all,
    finish_all,
    writers_event_time,
)
from connector.model import (
    PlannedRead,
    PlanRequest,
    SegmentDescription,
    SegmentTail,
    StreamDescription,
    initial_watermark,
)
from connector.names import SegmentId, StreamId
from connector.reader.lineage import ancestors, describe_streams

__all__ = ["StreamCut", "TimeState", "by_name", "start_state", "state_at_time"]


@dataclass(frozen=True)
class StreamCut:
    """A position in streams: their first readable data, their tails, explicit offsets, a time.

    Build one with :meth:`earliest`, :meth:`latest`, :meth:`offsets` or
    :meth:`at_time` (the style of PyFlink's ``KafkaOffsetsInitializer``);
    :meth:`of` also takes the words ``"earliest"``/``"head"``,
    ``"latest"``/``"tail"`` and a cut mapping. The same cut serves as a
    read's start and as a bounded read's end. ``kind`` is ``"earliest"``,
    ``"latest"``, ``"offsets"`` or ``"time"``; for ``"offsets"``, ``cut``
    holds ``(segment, byte offset)`` pairs sorted by segment name; for
    ``"time"``, ``time_ms`` holds the time.
    """

    kind: Literal["earliest", "latest", "offsets", "time"]
    cut: tuple[tuple[str, int], ...] = ()
    time_ms: int | None = None

    @classmethod
    def earliest(cls) -> StreamCut:
        """Each segment's first readable offset: everything not truncated away."""
        return cls("earliest")

    @classmethod
    def latest(cls) -> StreamCut:
        """The open segments at their tails, taken when the read is planned."""
        return cls("latest")

    @classmethod
    def offsets(cls, cut: Mapping[str, int]) -> StreamCut:
        """An explicit stream cut, ``{"scope/stream/N": byte offset}`` (a checkpoint's cut).

        Raises:
            InvalidArgumentError: the cut is empty, names a malformed segment
                or has an offset that is not an integer >= 0.
        """
        if not isinstance(cut, Mapping) or not cut:
            msg = f"a stream cut must be a non-empty mapping of segment to offset, got {cut!r}"
            raise InvalidArgumentError(msg)
        pairs = []
        for segment, offset in cut.items():
            SegmentId.parse(segment)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                msg = f"offset of segment {segment!r} must be an integer >= 0, got {offset!r}"
                raise InvalidArgumentError(msg)
            pairs.append((segment, offset))
        return cls("offsets", tuple(sorted(pairs)))

    @classmethod
    def at_time(cls, time_ms: int) -> StreamCut:
        """Each segment at its first event ingested at ``time_ms`` (epoch ms) or later.

        Kafka's ``startingOffsetsByTimestamp`` for every segment at once, and
        exact, since the store's watermark index maps ingestion time to
        offsets: a read starting here reads every event ingested at or after
        ``time_ms`` and none before; a read ending here every event ingested
        before it. Segments sealed before ``time_ms`` lie wholly before it,
        segments created after it wholly after; lineage is kept (a successor
        after its predecessors). A time after the tails: the tails.

        Raises:
            InvalidArgumentError: ``time_ms`` is not an integer >= 0.
        """
        if isinstance(time_ms, bool) or not isinstance(time_ms, int) or time_ms < 0:
            msg = f"a stream cut's time must be epoch milliseconds >= 0, got {time_ms!r}"
            raise InvalidArgumentError(msg)
        return cls("time", time_ms=time_ms)

    @classmethod
    def of(cls, value: StreamCut | str | Mapping[str, int]) -> StreamCut:
        """``value`` as a stream cut: one already, a word, or a cut mapping.

        Raises:
            InvalidArgumentError: naming ``value`` when it is none of those.
        """
        if isinstance(value, StreamCut):
            return value
        if isinstance(value, str):
            word = {"head": "earliest", "tail": "latest"}.get(value, value)
            if word == "earliest":
                return cls.earliest()
            if word == "latest":
                return cls.latest()
        elif isinstance(value, Mapping):
            return cls.offsets(value)
        msg = f"expected 'earliest', 'latest' or a stream cut mapping, got {value!r}"
        raise InvalidArgumentError(msg)

    @property
    def is_latest(self) -> bool:
        """Whether this is the tail of every open segment, taken when the read is planned."""
        return self.kind == "latest"

    def as_dict(self) -> dict[str, int]:
        """The cut as ``{segment: offset}`` (empty unless ``kind`` is ``"offsets"``)."""
        return dict(self.cut)

    def to_json(self) -> str:
        """The cut as text: ``"earliest"``, ``"latest"``, or JSON.

        ``{"scope/stream/N": offset}`` for offsets, ``{"time": epoch ms}`` for a time.
        """
        if self.kind == "time":
            return json.dumps({"time": self.time_ms})
        return json.dumps(self.as_dict(), sort_keys=True) if self.cut else self.kind

    def __repr__(self) -> str:
        if self.kind == "offsets":
            return f"StreamCut.offsets({self.as_dict()!r})"
        if self.kind == "time":
            return f"StreamCut.at_time({self.time_ms!r})"
        return f"StreamCut.{self.kind}()"


def start_state(
    client: StoreClient,
    streams: Sequence[str | StreamId],
    start: StreamCut | str | Mapping[str, int],
    end: Mapping[str, int] | None = None,
) -> GroupState:
    """The group state of a read of ``streams`` from ``start`` and, if given, up to cut ``end``.

    - :meth:`StreamCut.earliest`: each segment's first readable offset (as
      Kafka's earliest is the log start offset): the first segments from
      their heads; a segment a truncation took whole is finished, and its
      successors are looked at next;
    - :meth:`StreamCut.latest`: the open segments at their tails, with the
      store's watermark there; the sealed ones count as finished;
    - :meth:`StreamCut.offsets`: the cut's segments at its offsets; their
      ancestors count as finished;
    - :meth:`StreamCut.at_time`: each segment at its first event ingested
      at that time or later (:func:`state_at_time`).

    Watermarks elsewhere are the segments' initial ones (creation time - 1),
    and the writers' event times there are not known until read (they hold
    the event-time domain's watermark back until then). Finished segments
    before the start are never read.

    Raises:
        InvalidArgumentError: a cut names a segment the streams do not have.
    """
    position = StreamCut.of(start)
    names = [str(s) for s in streams]
    descriptions = describe_streams(client, streams)
    segments = by_name(descriptions)
    bounded_to = None if end is None else _reachable(segments, names, end)
    event_times: dict[str, int] = {}  # known at tails only: elsewhere known once read
    if position.kind in ("earliest", "time"):
        cut = {s.segment: 0 for d in descriptions for s in d.initial_segments}
        before: set[str] = set()
        watermarks = {name: initial_watermark(segments[name].creation_time) for name in cut}
    elif position.kind == "latest":
        tails = segment_tails(client, names)
        infos = [tails[s.segment] for d in descriptions for s in d.open_segments]
        cut = {i.segment: i.write_offset for i in infos}
        before = {s.segment for d in descriptions for s in d.segments if s.sealed}
        watermarks = {i.segment: i.watermark for i in infos}
        event_times = {i.segment: writers_event_time(i.event_time_watermark) for i in infos}
    else:
        cut = position.as_dict()
        unknown = sorted(set(cut) - set(segments))
        if unknown:
            msg = f"start cut names segments {unknown!r} that are not in streams {names!r}"
            raise InvalidArgumentError(msg)
        before = ancestors(segments, cut)
        watermarks = {name: initial_watermark(segments[name].creation_time) for name in cut}
    state = GroupState.starting_at(
        cut, watermarks, end_cut=end, bounded_to=bounded_to, event_times=event_times
    )
    state = replace(state, finished=frozenset(before))
    if position.kind == "earliest":
        state = _at_first_readable_offsets(client, state, segments)
    elif position.kind == "time":
        assert position.time_ms is not None
        state = _at_time(client, state, segments, position.time_ms).state
    return state


class TimeState(NamedTuple):
    """Every segment of streams at a time: see :func:`state_at_time`.

    ``ends``: the final offsets of the segments that lie wholly before the
    time (finished in ``state``).
    """

    state: GroupState
    ends: dict[str, int]


def state_at_time(
    client: StoreClient, streams: Sequence[str | StreamId], time_ms: int
) -> TimeState:
    """Where each segment of ``streams`` has its first event ingested at ``time_ms`` or later.

    Each readable segment's cursor is there, with a watermark the store
    vouches for (``time_ms - 1`` where such an event follows); the segments
    whose every event was ingested before ``time_ms`` (sealed, or truncated
    away) are finished, with their ends, and their successors looked at in
    turn; successors created later start at offset 0. The store finds each
    offset from its watermark index (``plan_read`` with ``before_time``).
    """
    descriptions = describe_streams(client, streams)
    segments = by_name(descriptions)
    cut = {s.segment: 0 for d in descriptions for s in d.initial_segments}
    watermarks = {name: initial_watermark(segments[name].creation_time) for name in cut}
    return _at_time(client, GroupState.starting_at(cut, watermarks), segments, time_ms)


def segment_tails(client: StoreClient, streams: Iterable[str]) -> dict[str, SegmentTail]:
    """Every segment's tail of ``streams`` (``scope/stream``), by name: one ``DescribeTails``.

    Raises:
        TidemarkError: the store's error for a stream (NotFoundError: it does not exist).
    """
    tails: dict[str, SegmentTail] = {}
    for answer in client.describe_tails(list(dict.fromkeys(streams))):
        if isinstance(answer, TidemarkError):
            raise answer
        tails.update((tail.segment, tail) for tail in answer.segments)
    return tails


def by_name(descriptions: Iterable[StreamDescription]) -> dict[str, SegmentDescription]:
    """The segments of ``descriptions`` by name."""
    return {s.segment: s for d in descriptions for s in d.segments}


def _reachable(
    segments: Mapping[str, SegmentDescription], names: list[str], end: Mapping[str, int]
) -> set[str]:
    """The segments an end cut lets a read reach: those in it and their ancestors."""
    unknown = sorted(set(end) - set(segments))
    if unknown:
        msg = f"end cut names segments {unknown!r} that are not in streams {names!r}"
        raise InvalidArgumentError(msg)
    return set(end) | ancestors(segments, end)


def _at_first_readable_offsets(
    client: StoreClient, state: GroupState, segments: Mapping[str, SegmentDescription]
) -> GroupState:
    """``state`` with each readable segment moved to its first readable offset.

    A truncation leaves a segment readable from its head on; a sealed
    segment whose data it took whole is finished, and its successors are
    looked at next.
    """

    def first_readable(at: Sequence[tuple[SegmentTail, int]]) -> list[_Place]:
        return [
            _Place(info.write_offset, None, finished=True)
            if info.sealed and info.first_offset >= info.write_offset > 0
            else _Place(max(info.first_offset, offset), None)
            for info, offset in at
        ]

    return _along_lineage(client, state, segments, first_readable).state


def _at_time(
    client: StoreClient,
    state: GroupState,
    segments: Mapping[str, SegmentDescription],
    time_ms: int,
) -> TimeState:
    """``state`` with each readable segment at its first event ingested at ``time_ms`` or later."""

    def first_at_time(at: Sequence[tuple[SegmentTail, int]]) -> list[_Place]:
        asked = [
            PlanRequest(info.segment, max(info.first_offset, offset), before_time=time_ms)
            for info, offset in at
        ]
        places = []
        for start in range(0, len(asked), MAX_ITEMS_PER_CALL):
            for planned in client.plan_reads(asked[start : start + MAX_ITEMS_PER_CALL]):
                if isinstance(planned, TidemarkError):
                    raise planned
                places.append(_at(planned, time_ms))
        return places

    return _along_lineage(client, state, segments, first_at_time)


def _at(planned: PlannedRead, time_ms: int) -> _Place:
    """Where a segment's first event ingested at ``time_ms`` or later is, as ``planned`` says."""
    if planned.end_of_segment:
        return _Place(planned.next_offset, None, finished=True)
    # An event ingested at time_ms or later follows: no later one is at or before time - 1.
    watermark = planned.watermark if planned.at_tail else max(planned.watermark, time_ms - 1)
    return _Place(planned.next_offset, watermark)


class _Place(NamedTuple):
    """Where a segment's cursor goes: an offset, a watermark there (None: keep), or finished."""

    offset: int
    watermark: int | None
    finished: bool = False


def _along_lineage(
    client: StoreClient,
    state: GroupState,
    segments: Mapping[str, SegmentDescription],
    place: Callable[[Sequence[tuple[SegmentTail, int]]], list[_Place]],
) -> TimeState:
    """``state`` with each readable segment where ``place`` puts it, successors in turn.

    ``place`` places many segments at once (each given with its tail and
    its cursor's offset). A segment it finishes brings in its successors
    (once all their predecessors are finished), which are placed next.
    Each round asks the store for the tails once (``DescribeTails``), not
    once per segment. Returns the state and the ends of the segments finished.
    """
    segments = dict(segments)
    ends: dict[str, int] = {}
    looked_at: set[str] = set()
    while todo := sorted(set(state.cursors) - looked_at):
        moved: dict[str, ReportedPosition] = {}
        ended: dict[str, list[Successor]] = {}
        streams = [str(SegmentId.parse(segment).stream_id) for segment in todo]
        tails = segment_tails(client, streams)
        at = [(tails[segment], state.cursors[segment].offset) for segment in todo]
        for segment, where in zip(todo, place(at), strict=True):
            looked_at.add(segment)
            cursor = state.cursors[segment]
            if where.finished:
                if not segments[segment].sealed:  # sealed since described: its successors are new
                    stream = SegmentId.parse(segment).stream_id
                    segments.update(by_name(describe_streams(client, [stream])))
                ended[segment] = [
                    Successor(d.segment, d.predecessors, d.creation_time)
                    for d in map(segments.__getitem__, segments[segment].successors)
                ]
                ends[segment] = where.offset
            elif where.offset > cursor.offset or (
                where.watermark is not None and where.watermark > cursor.watermark
            ):
                watermark = cursor.watermark if where.watermark is None else where.watermark
                moved[segment] = (where.offset, watermark, None)
        state = finish_all(advance_all(state, moved), ended)
    return TimeState(state, ends)
