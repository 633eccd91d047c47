"""Spark offsets: the reader core's group state, plus what a micro-batch needs to read.

An offset is a :class:`SourceOffset`: a :class:`GroupState` (where every
readable segment is, its watermark, which successors wait, which segments are
finished), the final offsets of finished segments, and the event-time
watermark (group watermark minus the lag, never lower than the previous one).

Offsets do not depend on the batch before them: :func:`latest_offset`
describes the whole stream as it is now, so a restarted query plans from
Spark's checkpointed offsets alone. Only limits (``maxEventsPerTrigger``,
``maxBytesPerTrigger``) plan from the previous offset, when it is known.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from connector.client.connection import StoreClient
from connector.errors import InvalidArgumentError
from connector.framing import iter_frames
from connector.model import SegmentDescription, StreamDescription
from connector.names import StreamId
from connector.reader.events import END_OF_TIME
from connector.reader.group import initial_state
from connector.reader.group_state import GroupState, advance, finish, group_watermark
from connector.reader.lineage import ancestors, describe_streams, successors_of

__all__ = [
    "SegmentRange",
    "SourceOffset",
    "initial_offset",
    "latest_offset",
    "limited_offset",
    "ranges_between",
]

_READ_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class SourceOffset:
    """A position of the source: see the module docstring."""

    state: GroupState
    ends: Mapping[str, int] = field(default_factory=dict)
    watermark: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The form Spark checkpoints: a dict of primitives."""
        return {
            "state": self.state.to_json(),
            "ends": json.dumps(dict(self.ends), sort_keys=True),
            "watermark": -1 if self.watermark is None else self.watermark,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceOffset:
        """Reads :meth:`to_dict`'s output."""
        try:
            watermark = int(data["watermark"])
            return cls(
                GroupState.from_json(data["state"]),
                json.loads(data["ends"]),
                None if watermark < 0 else watermark,
            )
        except (KeyError, TypeError, ValueError) as error:
            msg = f"invalid tidemark offset {dict(data)!r:.200}: {error}"
            raise InvalidArgumentError(msg) from None


@dataclass(frozen=True)
class SegmentRange:
    """Bytes ``[start, stop)`` of ``segment``, whole events."""

    segment: str
    start: int
    stop: int


def _event_watermark(state: GroupState, lag_ms: int | None, previous: int | None) -> int | None:
    """Group watermark minus the lag, never below ``previous``; None in processing time."""
    if lag_ms is None:
        return None
    group = group_watermark(state)
    candidate = group if group == END_OF_TIME else group - lag_ms
    return candidate if previous is None else max(previous, candidate)


def initial_offset(
    client: StoreClient,
    streams: Sequence[StreamId],
    start: str | Mapping[str, int],
    lag_ms: int | None,
) -> SourceOffset:
    """Where a query starts: ``earliest``, ``latest`` or an explicit cut.

    Segments before the start (sealed ones for ``latest``, ancestors of the
    cut's segments for a cut) count as finished, so no batch reads them.
    """
    names = [str(s) for s in streams]
    core_start: Any = (
        {"earliest": "head", "latest": "tail"}.get(start, start)
        if isinstance(start, str)
        else start
    )
    state = initial_state(client, names, core_start)
    descriptions = describe_streams(client, streams)
    if core_start == "tail":
        before = {s.segment for d in descriptions for s in d.segments if s.sealed}
    elif isinstance(core_start, Mapping):
        before = ancestors(_by_name(descriptions), core_start)
    else:
        before = set()
    state = replace(state, finished=state.finished | before)
    return SourceOffset(state, {}, _event_watermark(state, lag_ms, None))


def offset_at_cut(
    client: StoreClient, streams: Sequence[StreamId], cut: Mapping[str, int], lag_ms: int | None
) -> SourceOffset:
    """An end position at an explicit cut: the cut's segments there, their ancestors read whole."""
    descriptions = describe_streams(client, streams)
    by_name = _by_name(descriptions)
    before = ancestors(by_name, cut)
    ends = {name: client.segment_info(name).write_offset for name in before}
    state = GroupState.starting_at(
        dict(cut), {name: by_name[name].creation_time - 1 for name in cut}
    )
    state = replace(state, finished=frozenset(before))
    return SourceOffset(state, ends, _event_watermark(state, lag_ms, None))


def latest_offset(
    client: StoreClient,
    streams: Sequence[StreamId],
    previous: SourceOffset,
    lag_ms: int | None,
) -> SourceOffset:
    """Everything in the streams now: open segments at their tails, sealed ones finished.

    Segments already finished in ``previous`` stay finished, so what was
    before the start is never read. A segment sealed after the streams were
    described has successors the description lacks; the whole plan is made
    again, or the group watermark would skip them and pass their events.
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
                return latest_offset(client, streams, previous, lag_ms)  # scaled meanwhile
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
    return SourceOffset(state, ends, _event_watermark(state, lag_ms, previous.watermark))


def limited_offset(
    client: StoreClient,
    streams: Sequence[StreamId],
    previous: SourceOffset,
    lag_ms: int | None,
    max_events: int | None,
    max_bytes: int | None,
) -> SourceOffset:
    """At most ``max_events`` events and ``max_bytes`` bytes beyond ``previous``.

    An event larger than ``max_bytes`` is planned alone, so it is read at all.

    Segments with the oldest watermark go first; a successor is read only
    once all its predecessors are finished within the plan.
    """
    state = previous.state
    ends = dict(previous.ends)
    events_left = max_events
    bytes_left = max_bytes
    progressed = True
    while (
        progressed
        and (events_left is None or events_left > 0)
        and (bytes_left is None or bytes_left > 0)
    ):
        progressed = False
        for segment in sorted(state.cursors, key=lambda s: (state.cursors[s].watermark, s)):
            cursor = state.cursors[segment]
            budget = _READ_CHUNK if bytes_left is None else max(1, min(bytes_left, _READ_CHUNK))
            result = client.read(segment, cursor.offset, max_bytes=budget)
            frames = list(iter_frames(result.data, result.offset, verify=False))
            if bytes_left is not None and frames and frames[-1].end - cursor.offset > bytes_left:
                # Whole events within the budget; one event larger than the whole limit
                # goes alone, as the first of its batch, or no batch could ever take it.
                first_of_batch = bytes_left == max_bytes and events_left == max_events
                fitting = [f for f in frames if f.end - cursor.offset <= bytes_left]
                frames = fitting or (frames[:1] if first_of_batch else [])
            if events_left is not None:
                frames = frames[:events_left]
            stop = frames[-1].end if frames else cursor.offset
            whole = stop == result.next_offset
            watermark = (
                result.watermark
                if whole
                else frames[-1].ingestion_time - 1
                if frames
                else cursor.watermark
            )
            if stop > cursor.offset:
                progressed = True
                state = advance(state, segment, stop, watermark)
                if events_left is not None:
                    events_left -= len(frames)
                if bytes_left is not None:
                    bytes_left -= stop - cursor.offset
            if whole and result.end_of_segment:
                ends[segment] = stop
                state = finish(state, segment, successors_of(client, segment, result.successors))
                progressed = True
                break  # the cursors changed: plan again, oldest first
            if (events_left is not None and events_left <= 0) or (
                bytes_left is not None and bytes_left <= 0
            ):
                break
    return SourceOffset(state, ends, _event_watermark(state, lag_ms, previous.watermark))


def ranges_between(start: SourceOffset, end: SourceOffset) -> list[SegmentRange]:
    """The bytes a micro-batch from ``start`` to ``end`` reads, per segment."""
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


def _segment_order(name: str) -> tuple[str, int]:
    stream, _, number = name.rpartition("/")
    return stream, int(number)


def _by_name(descriptions: Sequence[StreamDescription]) -> dict[str, SegmentDescription]:
    return {s.segment: s for d in descriptions for s in d.segments}
