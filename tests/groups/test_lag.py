"""A reader group's lag per segment, from its record and the store's read plans: pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from connector.errors import TidemarkError, TruncatedError
from connector.groups.lag import StreamLag, group_lag, one_by_one, state_lag
from connector.groups.record import GroupRecord
from connector.groups.state import GroupState, SegmentCursor, WaitingSegment
from connector.model import PlannedRead, PlanRequest
from connector.timestamps import END_OF_TIME

#: Per segment: (first readable offset, tail, events per 10 bytes, watermark at the tail).
SEGMENTS = {"s/t/0": (0, 100, 10, 5_000), "s/t/1": (40, 60, 10, 7_000), "s/t/2": (0, 30, 10, 9_000)}


def plan(segment: str, offset: int, max_bytes: int | None = None) -> PlannedRead:
    first, tail, _, watermark = SEGMENTS[segment]
    if offset < first:
        msg = f"{segment} was truncated at {first}"
        raise TruncatedError(msg, segment, first)
    end = tail if max_bytes is None else min(tail, offset + max_bytes)
    mark = watermark if end == tail else watermark - 1_000
    return PlannedRead(segment, offset, end, (end - offset) // 10, mark, False, end == tail)


def test_each_segment_counts_its_events_to_the_tail_and_the_time_they_span() -> None:
    state = GroupState(
        cursors={
            "s/t/0": SegmentCursor(offset=30, watermark=4_000),
            "s/t/1": SegmentCursor(offset=0, watermark=1_000),  # before the truncation
        },
        waiting={"s/t/2": WaitingSegment(watermark=2_000, waiting_for=frozenset({"s/t/0"}))},
    )
    record = GroupRecord(("s/t",), 1, state, assignments={"s/t/0": "r1"})
    lag = group_lag(record, plan)
    by_segment = {s.segment: s for s in lag.segments}
    zero, one, two = by_segment["s/t/0"], by_segment["s/t/1"], by_segment["s/t/2"]
    assert (zero.offset, zero.tail, zero.events, zero.lag_ms, zero.reader) == (
        30,
        100,
        7,
        1_000,
        "r1",
    )
    assert (one.offset, one.tail, one.events, one.lag_ms) == (40, 60, 2, 6_000)  # counted from 40
    assert (two.events, two.lag_ms, two.waiting_for) == (3, 7_000, ("s/t/0",))
    assert (lag.events, lag.lag_ms) == (12, 7_000)


def test_a_bounded_group_lags_to_its_end_cut_and_a_caught_up_segment_not_at_all() -> None:
    state = GroupState(
        cursors={
            "s/t/0": SegmentCursor(offset=30, watermark=1_000, end=50),
            "s/t/2": SegmentCursor(offset=30, watermark=9_000),
        }
    )
    lag = group_lag(GroupRecord(("s/t",), 1, state), plan)
    by_segment = {s.segment: s for s in lag.segments}
    assert (by_segment["s/t/0"].tail, by_segment["s/t/0"].events) == (50, 2)
    assert (by_segment["s/t/2"].events, by_segment["s/t/2"].lag_ms) == (0, 0)
    at_end = GroupState(cursors={"s/t/0": SegmentCursor(offset=50, watermark=1, end=50)})
    assert group_lag(GroupRecord(("s/t",), 1, at_end), plan).events == 0


def test_the_lag_per_stream_sums_its_events_and_takes_its_largest_wait() -> None:
    state = GroupState(
        cursors={
            "s/t/0": SegmentCursor(offset=30, watermark=4_000),
            "s/t/2": SegmentCursor(offset=0, watermark=2_000),
        }
    )
    lag = state_lag(state, plan)
    assert lag.by_stream(["s/t", "s/u"]) == {
        "s/t": StreamLag(10, 7_000, 2_000),  # the store did not say when events were ingested
        "s/u": StreamLag(0, 0),
    }


def timed_plan(segment: str, offset: int, max_bytes: int | None = None) -> PlannedRead:
    """As :func:`plan`, saying the first planned event was ingested at ``offset * 100``."""
    planned = plan(segment, offset, max_bytes)
    first = offset * 100 if planned.events else None
    return replace(planned, first_ingestion_time=first)


def test_the_processing_time_watermark_is_the_oldest_unread_event_or_the_tail_watermark() -> None:
    state = GroupState(
        cursors={
            "s/t/0": SegmentCursor(offset=30, watermark=2_000),  # unread from 3_000
            "s/t/2": SegmentCursor(offset=30, watermark=8_000),  # nothing unread, tail at 9_000
        }
    )
    lag = state_lag(state, timed_plan)
    by_segment = {s.segment: s.processing_time_watermark for s in lag.segments}
    assert by_segment == {"s/t/0": 2_999, "s/t/2": 9_000}
    assert lag.processing_time_watermark == 2_999
    assert state_lag(GroupState(), timed_plan).processing_time_watermark == END_OF_TIME


def test_many_segments_are_planned_in_one_call_and_a_truncated_position_in_one_more() -> None:
    calls: list[list[PlanRequest]] = []
    single = one_by_one(timed_plan)

    def plan_many(requests: Sequence[PlanRequest]) -> Sequence[PlannedRead | TidemarkError]:
        calls.append(list(requests))
        return single(requests)

    state = GroupState(
        cursors={
            "s/t/0": SegmentCursor(offset=30, watermark=4_000),
            "s/t/1": SegmentCursor(offset=0, watermark=1_000),  # before the truncation at 40
            "s/t/2": SegmentCursor(offset=0, watermark=2_000),
        }
    )
    lag = state_lag(state, plan_many=plan_many)
    assert [len(c) for c in calls] == [3, 1]
    assert calls[1][0] == PlanRequest("s/t/1", 40)
    assert lag == state_lag(state, timed_plan)
