"""How far a reader group is behind the tails of its segments: unread events and their times.

What ``kafka-consumer-groups --describe`` shows per partition (CURRENT-OFFSET,
LOG-END-OFFSET, LAG), per segment of a group: where the group reads next,
the segment's tail, the events between them (its *unread events*), how much
ingestion time they span, and the segment's *processing-time watermark*
(the ingestion time of its oldest unread event - 1; with nothing unread,
the segment's watermark at the tail). The store counts the events
(:meth:`StoreClient.plan_reads` in one call, or a plan per segment), so no
event is read; :func:`lag_plans` names the plans counting takes. The words
are those of the glossary (``docs/glossary.md``).

:func:`state_lag` is the same for any group state: a host that keeps its
own (Spark's offsets) reports its figures by the same rule as the store's
metrics report a reader group's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from connector.errors import TidemarkError, TruncatedError
from connector.groups.record import GroupRecord
from connector.groups.state import GroupState
from connector.model import PlannedRead, PlanRequest
from connector.names import SegmentId
from connector.timestamps import END_OF_TIME

__all__ = [
    "GroupLag",
    "ManyPlanner",
    "Planner",
    "SegmentLag",
    "StreamLag",
    "group_lag",
    "lag_plans",
    "one_by_one",
    "processing_time_of",
    "state_lag",
]

#: ``plan_read(segment, offset, max_bytes=None)`` of a client or of the store itself.
Planner = Callable[..., PlannedRead]
#: ``plan_reads(requests)`` of a client: each plan, or the error it alone would raise.
ManyPlanner = Callable[[Sequence[PlanRequest]], Sequence[PlannedRead | TidemarkError]]


@dataclass(frozen=True)
class SegmentLag:
    """One unfinished segment of a group.

    ``offset``: where the group reads next (a successor not started yet
    starts at its first readable offset); ``tail``: the segment's end now, or
    the group's end cut there; ``events``: the events between them;
    ``lag_ms``: the ingestion time they span, from the watermark the group
    holds at ``offset`` to the segment's watermark at ``tail`` (0 when the
    group is there). ``reader``: who holds it, if anyone; ``waiting_for``:
    the predecessors a successor waits for. ``processing_time_watermark``:
    the ingestion time of the oldest unread event - 1, or the segment's
    watermark at ``tail`` when nothing is unread (:func:`processing_time_of`);
    ``watermark``: the group's watermark at ``offset``.
    """

    segment: str
    offset: int
    tail: int
    events: int
    lag_ms: int
    reader: str | None = None
    waiting_for: tuple[str, ...] = ()
    processing_time_watermark: int = END_OF_TIME
    watermark: int = END_OF_TIME


@dataclass(frozen=True)
class StreamLag:
    """A group in one stream: its unread events, the most time they span, its least watermark.

    ``processing_time_watermark``: the least over the stream's segments
    (END_OF_TIME: none left).
    """

    events: int
    lag_ms: int
    processing_time_watermark: int = END_OF_TIME


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
            totals[stream] = StreamLag(
                known.events + lag.events,
                max(known.lag_ms, lag.lag_ms),
                min(known.processing_time_watermark, lag.processing_time_watermark),
            )
        return totals

    @property
    def events(self) -> int:
        """Events the group has still to read, over every segment."""
        return sum(s.events for s in self.segments)

    @property
    def lag_ms(self) -> int:
        """The most ingestion time any segment's unread events span (0: caught up)."""
        return max((s.lag_ms for s in self.segments), default=0)

    @property
    def processing_time_watermark(self) -> int:
        """The least over every unfinished segment: every event ingested at or before it is read.

        END_OF_TIME when no segment is left.
        """
        return min((s.processing_time_watermark for s in self.segments), default=END_OF_TIME)


def group_lag(
    record: GroupRecord, plan: Planner | None = None, *, plan_many: ManyPlanner | None = None
) -> GroupLag:
    """The lag of the group ``record`` describes, counted by ``plan_many`` (or ``plan``).

    A position before a truncation counts from the first readable offset.
    """
    return state_lag(record.state, plan, record.assignments, plan_many=plan_many)


def one_by_one(plan: Planner) -> ManyPlanner:
    """``plan`` (one segment a call) as a :data:`ManyPlanner`."""

    def plan_many(requests: Sequence[PlanRequest]) -> list[PlannedRead | TidemarkError]:
        answers: list[PlannedRead | TidemarkError] = []
        for r in requests:
            try:
                answers.append(plan(r.segment, r.offset, max_bytes=r.max_bytes))
            except TidemarkError as error:
                answers.append(error)
        return answers

    return plan_many


def processing_time_of(planned: PlannedRead, watermark: int) -> int:
    """A segment's processing-time watermark, from a plan of its unread events.

    The ingestion time of the oldest unread event - 1 (every event ingested at
    or before it is read); with nothing unread, the segment's watermark at the
    plan's end. ``watermark`` (the group's at its position) stands in when
    the store does not say when the first event was ingested.
    """
    if not planned.events:
        return max(watermark, planned.watermark)
    if planned.first_ingestion_time is None:
        return watermark
    return max(watermark, planned.first_ingestion_time - 1)


@dataclass(frozen=True)
class _Unfinished:
    segment: str
    offset: int
    watermark: int
    end: int | None
    reader: str | None = None
    waiting_for: tuple[str, ...] = ()

    def request(self, offset: int) -> PlanRequest:
        """The read from ``offset`` to the tail, or to the end cut when there is one."""
        end = self.end
        return PlanRequest(self.segment, offset, max_bytes=None if end is None else end - offset)


def state_lag(
    state: GroupState,
    plan: Planner | None = None,
    assignments: Mapping[str, str] | None = None,
    *,
    plan_many: ManyPlanner | None = None,
) -> GroupLag:
    """The lag of a group at ``state`` (who holds each segment: ``assignments``).

    Planned by ``plan_many`` in one call (and one more for positions a
    truncation passed), or by ``plan`` a segment at a time.

    Raises:
        TidemarkError: what a plan failed with, other than a truncation.
    """
    if plan_many is None:
        if plan is None:
            msg = "state_lag needs plan or plan_many"
            raise TypeError(msg)
        plan_many = one_by_one(plan)
    unfinished = _unfinished(state, assignments or {})
    to_plan = [u for u in unfinished if u.end is None or u.end > u.offset]
    offsets = {u.segment: u.offset for u in to_plan}
    answers = dict(zip(offsets, plan_many([u.request(u.offset) for u in to_plan]), strict=True))
    truncated = [u for u in to_plan if isinstance(answers[u.segment], TruncatedError)]
    for u in truncated:
        error = answers[u.segment]
        assert isinstance(error, TruncatedError)
        offsets[u.segment] = error.first_offset
    again = plan_many([u.request(offsets[u.segment]) for u in truncated]) if truncated else []
    answers.update(zip((u.segment for u in truncated), again, strict=True))
    return GroupLag(tuple(_segment_lag(u, answers.get(u.segment), offsets) for u in unfinished))


def lag_plans(state: GroupState) -> list[PlanRequest]:
    """The plans :func:`state_lag` asks for of ``state`` (those past a truncation aside)."""
    return [
        u.request(u.offset) for u in _unfinished(state, {}) if u.end is None or u.end > u.offset
    ]


def _unfinished(state: GroupState, holders: Mapping[str, str]) -> list[_Unfinished]:
    """Every segment ``state`` has not finished: its cursors, then the successors waiting."""
    unfinished = [
        _Unfinished(s, c.offset, c.watermark, c.end, reader=holders.get(s))
        for s, c in sorted(state.cursors.items())
    ]
    unfinished += [
        _Unfinished(s, 0, w.watermark, None, waiting_for=tuple(sorted(w.waiting_for)))
        for s, w in sorted(state.waiting.items())
    ]
    return unfinished


def _segment_lag(
    u: _Unfinished, planned: PlannedRead | TidemarkError | None, offsets: Mapping[str, int]
) -> SegmentLag:
    if planned is None:  # at its end cut
        assert u.end is not None
        return SegmentLag(
            u.segment, u.offset, u.end, 0, 0, u.reader, u.waiting_for, u.watermark, u.watermark
        )
    if isinstance(planned, TidemarkError):
        raise planned
    lag_ms = max(0, planned.watermark - u.watermark) if planned.events else 0
    return SegmentLag(
        u.segment,
        offsets[u.segment],
        planned.next_offset,
        planned.events,
        lag_ms,
        u.reader,
        u.waiting_for,
        processing_time_of(planned, u.watermark),
        u.watermark,
    )
