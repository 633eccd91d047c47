"""How far a reader group is behind the tails of its segments, in events and in time.

What ``kafka-consumer-groups --describe`` shows per partition (CURRENT-OFFSET,
LOG-END-OFFSET, LAG), per segment of a group: where the group reads next,
the segment's tail, the events between them, and how much ingestion time
they span. The store counts the events (:meth:`StoreClient.plan_read`, or the
store's own ``plan_read`` on the server), so no event is read;
:func:`lag_plans` names the plans counting takes, for a caller that asks
for them all in one call first.

:func:`state_lag` is the same for any group state: a host that keeps its
own (Spark's offsets) reports its lag by the same rule as the store's
metrics report a reader group's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from connector.errors import TruncatedError
from connector.groups.record import GroupRecord
from connector.groups.state import GroupState
from connector.model import PlannedRead, PlanRequest
from connector.names import SegmentId

__all__ = [
    "GroupLag",
    "Planner",
    "SegmentLag",
    "StreamLag",
    "group_lag",
    "lag_plans",
    "state_lag",
]

#: ``plan_read(segment, offset, max_bytes=None)`` of a client or of the store itself.
Planner = Callable[..., PlannedRead]


@dataclass(frozen=True)
class SegmentLag:
    """One unfinished segment of a group.

    ``offset``: where the group reads next (a successor not started yet
    starts at its first readable offset); ``tail``: the segment's end now, or
    the group's end cut there; ``events``: the events between them;
    ``lag_ms``: the ingestion time they span, from the watermark the group
    holds at ``offset`` to the segment's watermark at ``tail`` (0 when the
    group is there). ``reader``: who holds it, if anyone; ``waiting_for``:
    the predecessors a successor waits for.
    """

    segment: str
    offset: int
    tail: int
    events: int
    lag_ms: int
    reader: str | None = None
    waiting_for: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamLag:
    """The lag of a group in one stream: its events to read and the most time they span."""

    events: int
    lag_ms: int


@dataclass(frozen=True)
class GroupLag:
    """A group's lag: per unfinished segment, its sum in events and its largest in time."""

    segments: tuple[SegmentLag, ...]

    def by_stream(self, streams: Iterable[str] = ()) -> dict[str, StreamLag]:
        """The lag per stream (``scope/stream``), with ``streams`` listed even when caught up."""
        totals = {str(stream): StreamLag(0, 0) for stream in streams}
        for lag in self.segments:
            stream = str(SegmentId.parse(lag.segment).stream_id)
            known = totals.get(stream, StreamLag(0, 0))
            totals[stream] = StreamLag(known.events + lag.events, max(known.lag_ms, lag.lag_ms))
        return totals

    @property
    def events(self) -> int:
        """Events the group has still to read, over every segment."""
        return sum(s.events for s in self.segments)

    @property
    def lag_ms(self) -> int:
        """The most ingestion time any segment's unread events span (0: caught up)."""
        return max((s.lag_ms for s in self.segments), default=0)


def group_lag(record: GroupRecord, plan: Planner) -> GroupLag:
    """The lag of the group ``record`` describes, counted by ``plan``.

    A position before a truncation counts from the first readable offset.
    """
    return state_lag(record.state, plan, record.assignments)


def state_lag(
    state: GroupState, plan: Planner, assignments: Mapping[str, str] | None = None
) -> GroupLag:
    """The lag of a group at ``state`` (who holds each segment: ``assignments``)."""
    holders = assignments or {}
    lags = [
        _segment_lag(
            segment,
            cursor.offset,
            cursor.watermark,
            cursor.end,
            plan,
            reader=holders.get(segment),
        )
        for segment, cursor in sorted(state.cursors.items())
    ]
    lags += [
        _segment_lag(
            segment,
            0,
            waiting.watermark,
            None,
            plan,
            waiting_for=tuple(sorted(waiting.waiting_for)),
        )
        for segment, waiting in sorted(state.waiting.items())
    ]
    return GroupLag(tuple(lags))


def lag_plans(state: GroupState) -> list[PlanRequest]:
    """The plans :func:`state_lag` asks for of ``state`` (those past a truncation aside)."""
    positions = [(s, c.offset, c.end) for s, c in sorted(state.cursors.items())]
    positions += [(segment, 0, None) for segment in sorted(state.waiting)]
    return [
        _request(segment, offset, end)
        for segment, offset, end in positions
        if end is None or end > offset
    ]


def _segment_lag(
    segment: str,
    offset: int,
    watermark: int,
    end: int | None,
    plan: Planner,
    reader: str | None = None,
    waiting_for: tuple[str, ...] = (),
) -> SegmentLag:
    if end is not None and end <= offset:
        return SegmentLag(segment, offset, end, 0, 0, reader, waiting_for)
    try:
        planned = _plan(plan, segment, offset, end)
    except TruncatedError as error:
        offset = error.first_offset
        planned = _plan(plan, segment, offset, end)
    lag_ms = max(0, planned.watermark - watermark) if planned.events else 0
    return SegmentLag(
        segment, offset, planned.next_offset, planned.events, lag_ms, reader, waiting_for
    )


def _plan(plan: Planner, segment: str, offset: int, end: int | None) -> PlannedRead:
    request = _request(segment, offset, end)
    if request.max_bytes is None:
        return plan(segment, offset)
    return plan(segment, offset, max_bytes=request.max_bytes)


def _request(segment: str, offset: int, end: int | None) -> PlanRequest:
    """The read from ``offset`` to the tail, or to the end cut ``end`` when there is one."""
    if end is None or end <= offset:
        return PlanRequest(segment, offset)
    return PlanRequest(segment, offset, max_bytes=end - offset)
