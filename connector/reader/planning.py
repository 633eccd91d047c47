"""Planning reads from outside a reader group: start positions, frontiers and byte ranges.

The API every host of the reader core plans with: the Spark adapter keeps a
:class:`Frontier` in each of its offsets, the Flink adapter in its state, and
standalone reader groups start from a :class:`StartPosition`.

A :class:`Frontier` is how far a read has planned: a :class:`GroupState`
(where every readable segment is and its watermark, which successors wait
for which predecessors, which segments are finished), the final offsets of
the segments it finished, and the last event-time watermark emitted. Between
two frontiers lie whole events, as :class:`SegmentRange` values.

Planning functions take a :class:`StoreClient` and a frontier and return a
new one; they never change their arguments and keep no state of their own,
so a host may plan again from any frontier it checkpointed:

- :func:`start_frontier`: where a read starts (:class:`StartPosition`);
- :func:`frontier_at_cut`: an end position at an explicit stream cut;
- :func:`advance_to_tail`: everything in the streams now;
- :func:`advance_within_budget`: at most so many events and bytes more,
  oldest watermark first;
- :func:`ranges_between`, :func:`lineage_chains`, :func:`split_range`,
  :func:`read_range`: what lies between two frontiers, grouped so
  successors follow their predecessors, cut into pieces a task reads, and
  reading it.

Watermarks: ``lag_ms`` is the reader's ``max_event_time_lag`` in ms (how far
event time may trail ingestion time), or None in the processing-time domain,
where frontiers carry no watermark. It is not the store's
``--max-watermark-lag-ms``, which says how long a segment must be idle before
the store advances its watermark by itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from connector.client.connection import StoreClient
from connector.errors import FailedPreconditionError, InvalidArgumentError
from connector.framing import HEADER
from connector.model import PlannedRead, ReadResult, SegmentDescription, StreamDescription
from connector.names import SegmentId, StreamId
from connector.reader.group_state import (
    GroupState,
    Successor,
    advance,
    allocate_bytes,
    emitted_watermark,
    finish,
    group_watermark,
    plan_cut,
    unassigned_oldest_first,
)
from connector.reader.lineage import KnownSegments, ancestors, describe_streams, successors_of

__all__ = [
    "READ_CHUNK_BYTES",
    "Frontier",
    "SegmentRange",
    "StartPosition",
    "advance_to_tail",
    "advance_within_budget",
    "chains_of",
    "frontier_at_cut",
    "frontier_watermark",
    "lineage_chains",
    "ranges_between",
    "read_range",
    "split_range",
    "start_frontier",
    "start_state",
]

#: The most bytes one store read asks for, for readers and planners alike.
READ_CHUNK_BYTES = 4 * 1024 * 1024


# --- start positions ----------------------------------------------------------------


@dataclass(frozen=True)
class StartPosition:
    """Where a read starts: the streams' heads, their tails, or an explicit stream cut.

    (A bounded read's end is said in the same words: the Spark adapter's
    ``endingStreamCut`` is a StartPosition too.)

    Build one with :meth:`earliest`, :meth:`latest` or :meth:`offsets` (the
    style of PyFlink's ``KafkaOffsetsInitializer``); :meth:`of` also takes
    the words ``"earliest"``/``"head"``, ``"latest"``/``"tail"`` and a cut
    mapping. ``kind`` is ``"earliest"``, ``"latest"`` or ``"offsets"``; for
    ``"offsets"``, ``cut`` holds ``(segment, byte offset)`` pairs sorted by
    segment name.
    """

    kind: Literal["earliest", "latest", "offsets"]
    cut: tuple[tuple[str, int], ...] = ()

    @classmethod
    def earliest(cls) -> StartPosition:
        """The streams' first segments from offset 0: everything ever written."""
        return cls("earliest")

    @classmethod
    def latest(cls) -> StartPosition:
        """The open segments at their tails: only what is written from now on."""
        return cls("latest")

    @classmethod
    def offsets(cls, cut: Mapping[str, int]) -> StartPosition:
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
    def of(cls, value: StartPosition | str | Mapping[str, int]) -> StartPosition:
        """``value`` as a start position: one already, a word, or a cut mapping.

        Raises:
            InvalidArgumentError: naming ``value`` when it is none of those.
        """
        if isinstance(value, StartPosition):
            return value
        if isinstance(value, str):
            word = {"head": "earliest", "tail": "latest"}.get(value, value)
            if word == "earliest":
                return cls.earliest()
            if word == "latest":
                return cls.latest()
        elif isinstance(value, Mapping):
            return cls.offsets(value)
        msg = f"start must be 'earliest', 'latest' or a stream cut mapping, got {value!r}"
        raise InvalidArgumentError(msg)

    @property
    def is_earliest(self) -> bool:
        """Whether this is the head of every stream."""
        return self.kind == "earliest"

    @property
    def is_latest(self) -> bool:
        """Whether this is the tail of every open segment, taken when the read is planned."""
        return self.kind == "latest"

    def as_dict(self) -> dict[str, int]:
        """The cut as ``{segment: offset}`` (empty unless ``kind`` is ``"offsets"``)."""
        return dict(self.cut)

    def to_json(self) -> str:
        """``"earliest"``, ``"latest"`` or the cut's JSON, ``{"scope/stream/N": offset}``."""
        return json.dumps(self.as_dict(), sort_keys=True) if self.cut else self.kind

    def __repr__(self) -> str:
        if self.kind == "offsets":
            return f"StartPosition.offsets({self.as_dict()!r})"
        return f"StartPosition.{self.kind}()"


def start_state(
    client: StoreClient,
    streams: Sequence[str | StreamId],
    start: StartPosition | str | Mapping[str, int],
    end: Mapping[str, int] | None = None,
) -> GroupState:
    """The group state of a read starting at ``start`` and, if given, ending at cut ``end``.

    Segments are readable from the start cut with a safe watermark: the
    store's at the tails for :meth:`StartPosition.latest`, otherwise each
    segment's creation time - 1 (PDP 26, "Reader Group Manager").
    :meth:`StartPosition.earliest` is each segment's first readable offset
    (as Kafka's earliest is the log start offset): after a truncation, a
    segment's head, and a segment truncated away whole is finished, its
    successors next.

    Raises:
        InvalidArgumentError: a cut names a segment the streams do not have.
    """
    position = StartPosition.of(start)
    names = [str(s) for s in streams]
    descriptions = describe_streams(client, streams)
    by_name = _by_name(descriptions)
    if position.kind == "earliest":
        cut = {s.segment: 0 for d in descriptions for s in d.initial_segments}
        watermarks = {name: by_name[name].creation_time - 1 for name in cut}
        bounded_to = _bounded_to(by_name, names, end)
        state = GroupState.starting_at(cut, watermarks, end_cut=end, bounded_to=bounded_to)
        return _at_first_readable_offsets(client, state, by_name)
    if position.kind == "latest":
        infos = [client.segment_info(s.segment) for d in descriptions for s in d.open_segments]
        cut = {i.segment: i.write_offset for i in infos}
        watermarks = {i.segment: i.watermark for i in infos}
    else:
        cut = position.as_dict()
        unknown = sorted(set(cut) - set(by_name))
        if unknown:
            msg = f"start cut names segments {unknown!r} that are not in streams {names!r}"
            raise InvalidArgumentError(msg)
        watermarks = {name: by_name[name].creation_time - 1 for name in cut}
    bounded_to = _bounded_to(by_name, names, end)
    return GroupState.starting_at(cut, watermarks, end_cut=end, bounded_to=bounded_to)


def _bounded_to(
    by_name: Mapping[str, SegmentDescription], names: list[str], end: Mapping[str, int] | None
) -> set[str] | None:
    """The segments an end cut lets a read reach: those in it and their ancestors."""
    if end is None:
        return None
    unknown = sorted(set(end) - set(by_name))
    if unknown:
        msg = f"end cut names segments {unknown!r} that are not in streams {names!r}"
        raise InvalidArgumentError(msg)
    return set(end) | ancestors(by_name, end)


def _at_first_readable_offsets(
    client: StoreClient, state: GroupState, by_name: Mapping[str, SegmentDescription]
) -> GroupState:
    """``state`` with each readable segment moved to its first readable offset (Kafka's earliest).

    A truncation leaves a segment readable from its head on; a sealed
    segment whose data it took whole is finished, and its successors are
    looked at next.
    """
    by_name = dict(by_name)
    looked_at: set[str] = set()
    while todo := sorted(set(state.cursors) - looked_at):
        for segment in todo:
            looked_at.add(segment)
            info = client.segment_info(segment)
            if info.sealed and info.first_offset >= info.write_offset > 0:
                if not by_name[segment].sealed:  # sealed since described: its successors are new
                    by_name.update(_by_name(describe_streams(client, [_stream_of(segment)])))
                successors = [
                    Successor(d.segment, d.predecessors, d.creation_time)
                    for d in map(by_name.__getitem__, by_name[segment].successors)
                ]
                state = finish(state, segment, successors)
            elif info.first_offset > state.cursors[segment].offset:
                state = advance(state, segment, info.first_offset, state.cursors[segment].watermark)
    return state


# --- frontiers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Frontier:
    """How far a read has planned: see the module docstring.

    Attributes:
        state: the group state at the frontier.
        ends: the final offset of each segment finished while planning (the
            segments finished before the start are not listed: nothing of
            them is read).
        watermark: the last event-time watermark emitted, or None (none yet,
            or the processing-time domain). It never steps back from one
            frontier to the next.
    """

    state: GroupState
    ends: Mapping[str, int] = field(default_factory=dict)
    watermark: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "ends", MappingProxyType(dict(self.ends)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict of plain values, keys sorted; :meth:`from_dict` reads it back."""
        return _sorted(
            {
                "state": self.state.to_dict(),
                "ends": dict(self.ends),
                "watermark": self.watermark,
            }
        )

    def to_json(self) -> str:
        """The compact JSON form of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Frontier:
        """Reads :meth:`to_dict`'s output, and the older form whose parts were JSON strings.

        Raises:
            InvalidArgumentError: naming the value when it is not a frontier.
        """
        try:
            state = data["state"]
            ends = data["ends"]
            watermark = data["watermark"]
            if isinstance(state, str):  # the older form: JSON inside strings, -1 for no watermark
                state = json.loads(state)
                ends = json.loads(ends)
                watermark = None if int(watermark) < 0 else int(watermark)
            return cls(
                GroupState.from_dict(state),
                {str(s): int(o) for s, o in ends.items()},
                None if watermark is None else int(watermark),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            msg = f"invalid frontier {dict(data)!r:.200}: {error!r}"
            raise InvalidArgumentError(msg) from None

    @classmethod
    def from_json(cls, text: str) -> Frontier:
        """Reads :meth:`to_json`'s output."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            msg = f"invalid frontier JSON {text!r:.200}: {error}"
            raise InvalidArgumentError(msg) from None
        if not isinstance(data, Mapping):
            msg = f"invalid frontier JSON {text!r:.200}: not an object"
            raise InvalidArgumentError(msg)
        return cls.from_dict(data)


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def frontier_watermark(state: GroupState, lag_ms: int | None, previous: int | None) -> int | None:
    """The watermark a frontier at ``state`` carries, after one that carried ``previous``.

    The group watermark less ``lag_ms`` when it rose above ``previous``
    (:func:`~connector.reader.group_state.emitted_watermark`), else ``previous``;
    None in the processing-time domain (``lag_ms`` None).
    """
    if lag_ms is None:
        return None
    rose = emitted_watermark(group_watermark(state), lag_ms, previous)
    return previous if rose is None else rose


def start_frontier(
    client: StoreClient,
    streams: Sequence[str | StreamId],
    start: StartPosition | str | Mapping[str, int],
    lag_ms: int | None,
) -> Frontier:
    """Where a read of ``streams`` starts.

    Segments before the start (sealed ones for :meth:`StartPosition.latest`,
    ancestors of the cut's segments for :meth:`StartPosition.offsets`) count
    as finished, so no plan reads them.

    Raises:
        InvalidArgumentError: a cut names a segment the streams do not have.
    """
    position = StartPosition.of(start)
    state = start_state(client, streams, position)
    descriptions = describe_streams(client, streams)
    if position.kind == "latest":
        before = {s.segment for d in descriptions for s in d.segments if s.sealed}
    elif position.kind == "offsets":
        before = ancestors(_by_name(descriptions), position.as_dict())
    else:
        before = set()
    state = replace(state, finished=state.finished | before)
    return Frontier(state, {}, frontier_watermark(state, lag_ms, None))


def frontier_at_cut(
    client: StoreClient,
    streams: Sequence[str | StreamId],
    cut: Mapping[str, int],
    lag_ms: int | None,
) -> Frontier:
    """An end position at stream cut ``cut``: its segments there, their ancestors read whole.

    Raises:
        InvalidArgumentError: the cut names a segment the streams do not have.
    """
    by_name = _by_name(describe_streams(client, streams))
    before = ancestors(by_name, cut)
    ends = {name: client.segment_info(name).write_offset for name in before}
    state = GroupState.starting_at(
        dict(cut), {name: by_name[name].creation_time - 1 for name in cut}
    )
    state = replace(state, finished=frozenset(before))
    return Frontier(state, ends, frontier_watermark(state, lag_ms, None))


def advance_to_tail(
    client: StoreClient,
    streams: Sequence[str | StreamId],
    previous: Frontier,
    lag_ms: int | None,
) -> Frontier:
    """Everything in the streams now: open segments at their tails, sealed ones finished.

    Does not depend on ``previous`` beyond its finished segments, which stay
    finished (what was before the start is never read), its ends and its
    watermark. A segment sealed after the streams were described has
    successors the description lacks; the plan is then made again, or the
    group watermark would skip them and pass their events.
    """
    cursors: dict[str, tuple[int, int]] = {}
    finished = set(previous.state.finished)
    ends = dict(previous.ends)
    for description in describe_streams(client, streams):
        for segment in description.segments:
            if segment.segment in previous.state.finished:
                continue
            info = client.segment_info(segment.segment)
            if info.sealed and not segment.sealed:
                return advance_to_tail(client, streams, previous, lag_ms)  # scaled meanwhile
            if info.sealed:
                finished.add(segment.segment)
                ends[segment.segment] = info.write_offset
            else:
                cursors[segment.segment] = (info.write_offset, info.watermark)
    state = GroupState.starting_at(
        {s: o for s, (o, _) in cursors.items()},
        {s: w for s, (_, w) in cursors.items()},
    )
    state = replace(state, finished=frozenset(finished))
    return Frontier(state, ends, frontier_watermark(state, lag_ms, previous.watermark))


def advance_within_budget(
    client: StoreClient,
    previous: Frontier,
    lag_ms: int | None,
    *,
    max_events: int | None = None,
    max_bytes: int | None = None,
) -> Frontier:
    """At most ``max_events`` events and ``max_bytes`` bytes beyond ``previous`` (None: no limit).

    - Oldest watermark first: the budget goes to the readable segments in
      the order of their watermarks (:func:`~connector.reader.group_state.allocate_bytes`),
      whole events only (:func:`~connector.reader.group_state.plan_cut`).
    - An event larger than ``max_bytes`` is planned alone, as the only
      event of its plan, or no plan could ever take it.
    - A successor is read only once all its predecessors are finished
      within the plan; a segment read to its seal is finished in the plan.
    - Segments with nothing left to read still move: their watermark
      becomes the store's at their tail (idle ticks included) and a sealed
      one is finished, whatever the budget, so event time advances on idle
      streams under a budget too.

    The store counts the events (:meth:`StoreClient.plan_read`, a lookup
    in its index): one call per readable segment, one more for each segment
    whose share the byte budget cuts short, and one per segment brought in
    by a finish. No event is read back.

    Raises:
        InvalidArgumentError: a limit is given and is not > 0.
    """
    _check_limits(max_events, max_bytes)
    plan = _BudgetedPlan(previous.state, dict(previous.ends), max_events, max_bytes)
    to_read = set(plan.state.cursors)
    while to_read:
        to_read = plan.step(client, to_read)
    return Frontier(
        plan.state, plan.ends, frontier_watermark(plan.state, lag_ms, previous.watermark)
    )


class _BudgetedPlan:
    """The state of one :func:`advance_within_budget` call, advanced a pass at a time.

    The store plans each segment's share (:meth:`StoreClient.plan_read`, a
    lookup in its index): no event is read back to be counted.
    """

    def __init__(
        self,
        state: GroupState,
        ends: dict[str, int],
        max_events: int | None,
        max_bytes: int | None,
    ):
        self.state = state
        self.ends = ends
        self.events_left = max_events
        self.bytes_left = max_bytes
        self.max_bytes = max_bytes
        self.planned_any = False
        self.seen: set[str] = set()  # segments planned (or probed) in this plan

    def _budget_left(self) -> bool:
        return (self.events_left is None or self.events_left > 0) and (
            self.bytes_left is None or self.bytes_left > 0
        )

    def _plan(
        self, client: StoreClient, segment: str, events: int | None, size: int | None
    ) -> PlannedRead:
        """The store's plan of ``segment`` from its cursor, never past its end cut."""
        cursor = self.state.cursors[segment]
        if cursor.end is not None:
            room = max(cursor.end - cursor.offset, 1)
            size = room if size is None else min(size, room)
        return client.plan_read(segment, cursor.offset, events, size)

    def _plans(
        self, client: StoreClient, segments: list[str]
    ) -> dict[str, tuple[PlannedRead, bool]]:
        """Plans ``segments`` oldest first, each as far as the budget not yet covered allows.

        Once the plans cover the budget, the others are only probed (a plan
        of one event) for their tail watermark or end; a segment already
        planned in this call is not probed again. Returns (plan, probe).
        """
        events = self.events_left
        size = self.bytes_left
        plans = {}
        for segment in segments:
            covered = (events is not None and events <= 0) or (size is not None and size <= 0)
            if covered and segment in self.seen:
                continue
            plan = self._plan(client, segment, 1 if covered else events, None if covered else size)
            plans[segment] = (plan, covered)
            self.seen.add(segment)
            if not covered:
                events = None if events is None else events - plan.events
                size = None if size is None else size - (plan.next_offset - plan.offset)
        return plans

    def step(self, client: StoreClient, to_read: set[str]) -> set[str]:
        """One pass over ``to_read``; returns the segments to plan in the next pass."""
        order = [s for s in unassigned_oldest_first(self.state, ()) if s in to_read]
        ended: dict[str, tuple[str, ...]] = {
            s: () for s in order if self.state.cursors[s].at_end_cut
        }
        plans = self._plans(client, [s for s in order if s not in ended])
        wants = {
            s: 0 if probe else plan.next_offset - plan.offset for s, (plan, probe) in plans.items()
        }
        grants = (
            allocate_bytes(self.state, wants, self.bytes_left)
            if self.bytes_left is None or self.bytes_left > 0
            else dict.fromkeys(wants, 0)
        )
        reachable: dict[str, int] = {}
        watermarks: dict[str, int] = {}
        more: set[str] = set()
        for segment in order:
            if segment not in plans:
                continue
            cursor = self.state.cursors[segment]
            plan, probe = plans[segment]
            taken = plan
            if probe:
                taken = None
            elif plan.next_offset - cursor.offset > grants.get(segment, 0):
                taken = None
                grant = grants.get(segment, 0)
                if grant > 0:  # the grant cuts the plan short: ask for the cut
                    cut = self._plan(client, segment, self.events_left, grant)
                    if cut.next_offset - cursor.offset <= grant:
                        taken = cut
                if taken is None and not self.planned_any and plan.events:
                    taken = self._plan(client, segment, 1, None)  # larger than the budget: alone
            if (
                taken is not None
                and self.events_left is not None
                and taken.events > max(self.events_left, 0)
            ):
                taken = (
                    self._plan(client, segment, self.events_left, taken.next_offset - cursor.offset)
                    if self.events_left > 0
                    else None
                )
            count = taken.events if taken is not None else 0
            stop = taken.next_offset if taken is not None else cursor.offset
            if taken is not None:
                watermarks[segment] = taken.watermark
            elif plan.events == 0:  # at the tail: the tail's watermark holds
                watermarks[segment] = plan.watermark
            reachable[segment] = stop
            if count:
                self.planned_any = True
                if self.events_left is not None:
                    self.events_left -= count
                if self.bytes_left is not None:
                    self.bytes_left -= stop - cursor.offset
            final = taken if taken is not None else plan if plan.events == 0 else None
            if final is not None and final.end_of_segment:
                ended[segment] = final.successors
            elif taken is not None and count and not taken.at_tail:
                more.add(segment)  # stopped short of the tail: there may be room for more
        for segment, offset in plan_cut(self.state, reachable).items():
            if segment in reachable:
                watermark = watermarks.get(segment, self.state.cursors[segment].watermark)
                self.state = advance(self.state, segment, offset, watermark)
        before = set(self.state.cursors)
        for segment, successors in ended.items():
            self.ends[segment] = self.state.cursors[segment].offset
            self.state = finish(self.state, segment, successors_of(client, segment, successors))
        brought_in = set(self.state.cursors) - before
        if self._budget_left():
            return more | brought_in
        return brought_in - self.seen


# --- ranges ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentRange:
    """Bytes ``[start, stop)`` of ``segment``: whole events."""

    segment: str
    start: int
    stop: int


def ranges_between(start: Frontier, end: Frontier) -> list[SegmentRange]:
    """The bytes a read from frontier ``start`` to frontier ``end`` covers, per segment.

    Ordered by stream, then segment number; segments finished at ``start``
    are left out, segments new since ``start`` are read from offset 0.
    """
    ranges = []
    stops = {s: c.offset for s, c in end.state.cursors.items()}
    stops.update({s: o for s, o in end.ends.items() if s in end.state.finished})
    for segment, stop in sorted(stops.items(), key=lambda item: _segment_order(item[0])):
        if segment in start.state.finished:
            continue
        cursor = start.state.cursors.get(segment)
        begin = cursor.offset if cursor is not None else 0
        if stop > begin:
            ranges.append(SegmentRange(segment, begin, stop))
    return ranges


def lineage_chains(client: StoreClient, ranges: Sequence[SegmentRange]) -> list[list[SegmentRange]]:
    """``ranges`` grouped into chains that one task reads in order.

    Ranges of segments related by scaling (predecessor and successor,
    transitively) share a chain, each after its predecessors, so events of
    one routing key are read in the order written; unrelated segments get
    chains of their own and may be read in parallel.
    """
    if not ranges:
        return []
    return chains_of(KnownSegments().covering(client, [r.segment for r in ranges]), ranges)


def chains_of(
    by_name: Mapping[str, SegmentDescription], ranges: Sequence[SegmentRange]
) -> list[list[SegmentRange]]:
    """:func:`lineage_chains`, given the descriptions of the ranges' segments by name."""
    parent = {r.segment: r.segment for r in ranges}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    for segment in parent:
        for predecessor in by_name[segment].predecessors:
            if predecessor in parent:
                parent[root(segment)] = root(predecessor)
    chains: dict[str, list[SegmentRange]] = {}
    for segment_range in sorted(ranges, key=lambda r: _segment_order(r.segment)):
        chains.setdefault(root(segment_range.segment), []).append(segment_range)
    return list(chains.values())


def read_range(
    client: StoreClient, segment_range: SegmentRange, chunk_bytes: int = READ_CHUNK_BYTES
) -> Iterator[ReadResult]:
    """Reads ``segment_range`` as store reads of at most ``chunk_bytes`` each, in order.

    Each result holds whole events; together they cover the range exactly.
    """
    offset = segment_range.start
    while offset < segment_range.stop:
        result = client.read(
            segment_range.segment, offset, max_bytes=min(chunk_bytes, segment_range.stop - offset)
        )
        yield result
        offset = result.next_offset


def split_range(
    client: StoreClient,
    segment_range: SegmentRange,
    *,
    max_events: int | None = None,
    max_bytes: int | None = None,
) -> list[SegmentRange]:
    """``segment_range`` in consecutive pieces of at most ``max_events`` events and ``max_bytes``.

    Whole events only: the store says where each piece ends
    (:meth:`StoreClient.plan_read`, one call per piece, no event read back).
    An event larger than ``max_bytes`` is a piece of its own. With neither
    limit the range is its only piece.

    Raises:
        InvalidArgumentError: a limit is given and is not > 0.
    """
    _check_limits(max_events, max_bytes)
    length = segment_range.stop - segment_range.start
    # A frame is at least a header long: a short range holds few enough events unasked.
    if (max_events is None or length // HEADER.size <= max_events) and (
        max_bytes is None or length <= max_bytes
    ):
        return [segment_range]
    pieces = []
    offset, stop = segment_range.start, segment_range.stop
    while offset < stop:
        room = stop - offset if max_bytes is None else min(max_bytes, stop - offset)
        # At least one event: an event larger than max_bytes is planned alone.
        planned = client.plan_read(segment_range.segment, offset, max_events, room)
        end = min(planned.next_offset, stop)
        if end <= offset:
            msg = f"the store holds no event of {segment_range} at offset {offset}"
            raise FailedPreconditionError(msg)
        pieces.append(SegmentRange(segment_range.segment, offset, end))
        offset = end
    return pieces


def _check_limits(max_events: int | None, max_bytes: int | None) -> None:
    """Raises InvalidArgumentError, naming it, for a limit given that is not > 0."""
    for name, limit in (("max_events", max_events), ("max_bytes", max_bytes)):
        if limit is not None and (isinstance(limit, bool) or limit <= 0):
            msg = f"{name} must be > 0 or None, got {limit!r}"
            raise InvalidArgumentError(msg)


def _segment_order(name: str) -> tuple[str, int]:
    segment = SegmentId.parse(name)
    return str(segment.stream_id), segment.number


def _stream_of(segment: str) -> StreamId:
    return SegmentId.parse(segment).stream_id


def _by_name(descriptions: Iterable[StreamDescription]) -> dict[str, SegmentDescription]:
    return {s.segment: s for d in descriptions for s in d.segments}
