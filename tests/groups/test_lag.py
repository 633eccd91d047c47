"""A reader group's lag per segment, from its record and the store's read plans: pure."""

from __future__ import annotations

from connector.errors import TruncatedError
from connector.groups.lag import StreamLag, group_lag, state_lag
from connector.groups.record import GroupRecord
from connector.groups.state import GroupState, SegmentCursor, WaitingSegment
from connector.model import PlannedRead

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
    assert lag.by_stream(["s/t", "s/u"]) == {"s/t": StreamLag(10, 7_000), "s/u": StreamLag(0, 0)}
