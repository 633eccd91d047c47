"""A group's two watermarks, their delays and diagnosis, and what holds them: pure, on plain values.

Time is a plain number (a synthetic clock), so each figure is exact.
"""

from __future__ import annotations

import pytest

from connector.groups.lag import GroupLag, SegmentLag
from connector.groups.progress import Diagnosis, diagnose, event_time_watermark, group_progress
from connector.groups.record import GroupRecord
from connector.groups.stall import Cause, StoreTiming, why
from connector.groups.state import NO_WRITER, GroupState, SegmentCursor, WaitingSegment
from connector.model import SegmentTail, WriterAssertion
from connector.timestamps import END_OF_TIME

NOW = 1_000_000


def tail(
    segment: str, watermark: int, last_write: int, event_time: int | None = None
) -> SegmentTail:
    return SegmentTail(segment, 1, 100, 0, watermark, event_time, False, last_write, 0, 0, 1, 0)


@pytest.mark.parametrize(
    ("processing", "event", "unread", "expected"),
    [
        (1_000, 2_000, 5, Diagnosis.HEALTHY),
        (1_000, 90_000, 0, Diagnosis.DATA_OLD),
        (90_000, 90_000, 5, Diagnosis.BLOCKED),
        (90_000, 90_000, 0, Diagnosis.STANDING_STILL),
        (1_000, None, 0, Diagnosis.NOT_KNOWN),
    ],
)
def test_the_two_delays_say_healthy_old_data_or_blocked(
    processing: int, event: int | None, unread: int, expected: Diagnosis
) -> None:
    assert diagnose(processing, event, unread, large_after_ms=30_000) is expected


def test_the_event_time_watermark_is_the_writers_else_the_ingestion_watermark() -> None:
    assert event_time_watermark(500, 300) == 300
    assert event_time_watermark(500, NO_WRITER) == 500
    assert event_time_watermark(500, None) is None  # not read yet, and writers assert
    assert event_time_watermark(500, None, writers_assert=False) == 500


def test_a_groups_figures_come_from_its_unread_events_and_the_clock() -> None:
    lag = GroupLag(
        (
            SegmentLag("s/t/0", 0, 100, 4, 0, processing_time_watermark=NOW - 40_000, watermark=1),
            SegmentLag("s/t/1", 50, 50, 0, 0, processing_time_watermark=NOW - 10, watermark=2),
        )
    )
    progress = group_progress(lag, NOW - 50_000, NO_WRITER, NOW, large_after_ms=30_000)
    assert (progress.processing_time_watermark, progress.processing_time_delay_ms) == (
        NOW - 40_000,
        40_000,
    )
    assert (progress.event_time_watermark, progress.event_time_delay_ms) == (NOW - 50_000, 50_000)
    assert (progress.unread_events, progress.diagnosis) == (4, Diagnosis.BLOCKED)
    done = group_progress(GroupLag(()), END_OF_TIME, NO_WRITER, NOW)
    assert (done.processing_time_delay_ms, done.event_time_delay_ms) == (0, 0)


def record(
    cursors: dict[str, SegmentCursor],
    assignments: dict[str, str] | None = None,
    leases: dict[str, int] | None = None,
    waiting: dict[str, WaitingSegment] | None = None,
) -> GroupRecord:
    state = GroupState(cursors=cursors, waiting=waiting or {})
    return GroupRecord(("s/t",), 1, state, assignments or {}, leases or {})


def caught_up(segment: str, watermark: int, reader: str | None = "r1") -> SegmentLag:
    return SegmentLag(segment, 10, 10, 0, 0, reader, (), watermark, watermark)


def test_the_holder_is_the_segment_at_the_minimum_and_how_far_behind_the_next_it_is() -> None:
    cursors = {"s/t/0": SegmentCursor(10, 990_000), "s/t/1": SegmentCursor(10, 996_000)}
    rec = record(cursors, {"s/t/0": "r1", "s/t/1": "r1"}, {"r1": NOW + 20_000})
    lag = GroupLag((caught_up("s/t/0", 990_000), caught_up("s/t/1", 996_000)))
    tails = {"s/t/0": tail("s/t/0", 990_000, 990_001), "s/t/1": tail("s/t/1", 996_000, 996_001)}
    held = why("s/g", rec, lag, tails, {}, StoreTiming(10_000, 1_000, 60_000), NOW).ingestion_time
    assert (held.cause, held.segment, held.since) == (Cause.IDLE_TICK_DUE, "s/t/0", 990_001)
    assert (held.behind_next_ms, held.moves_in_ms) == (6_000, 2)  # due once idle > 10 s
    assert "6.0 s behind the next segment" in held.text


def test_a_successor_waits_for_its_predecessor_and_a_group_without_readers_says_so() -> None:
    waiting = {"s/t/2": WaitingSegment(5, frozenset({"s/t/0"}))}
    rec = record({"s/t/0": SegmentCursor(10, 900)}, {"s/t/0": "r1"}, {"r1": NOW + 1}, waiting)
    lag = GroupLag(
        (caught_up("s/t/0", 900), SegmentLag("s/t/2", 0, 0, 0, 0, None, ("s/t/0",), 5, 5))
    )
    held = why("s/g", rec, lag, {}, {}, StoreTiming(), NOW).ingestion_time
    assert (held.cause, held.segment) == (Cause.WAITING, "s/t/2")
    assert "waits for s/t/0 to be read to the end" in held.text
    nobody = record({"s/t/0": SegmentCursor(10, 900)})
    alone = GroupLag((caught_up("s/t/0", 900, reader=None),))
    assert why("s/g", nobody, alone, {}, {}, StoreTiming(), NOW).ingestion_time.cause is (
        Cause.NO_READER
    )
    assert why("s/g", nobody, GroupLag(()), {}, {}, StoreTiming(), NOW).ingestion_time.cause is (
        Cause.NOTHING_LEFT
    )


def test_in_the_event_time_the_writer_at_the_minimum_is_named_behind_or_silent() -> None:
    cursors = {
        "s/t/0": SegmentCursor(10, 999_000, event_time=500_000),
        "s/t/1": SegmentCursor(10, 999_000, event_time=NO_WRITER),
    }
    rec = record(cursors, {"s/t/0": "r1", "s/t/1": "r1"}, {"r1": NOW + 20_000})
    lag = GroupLag((caught_up("s/t/0", 999_000), caught_up("s/t/1", 999_000)))
    tails = {"s/t/0": tail("s/t/0", 999_000, 999_001, event_time=500_000)}
    writers = [WriterAssertion("old-device", 500_000, NOW - 200), WriterAssertion("b", 800_000, 1)]
    timing = StoreTiming(writer_idle_timeout_ms=60_000)
    held = why("s/g", rec, lag, tails, {"s/t/0": writers}, timing, NOW).event_time
    assert held is not None
    assert (held.cause, held.writer, held.watermark) == (Cause.WRITER_BEHIND, "old-device", 500_000)
    silent = [WriterAssertion("old-device", 500_000, NOW - 45_000)]
    held = why("s/g", rec, lag, tails, {"s/t/0": silent}, timing, NOW).event_time
    assert held is not None and (held.cause, held.moves_in_ms) == (Cause.SILENT_WRITER, 15_000)
    never = StoreTiming(writer_idle_timeout_ms=0)
    held = why("s/g", rec, lag, tails, {"s/t/0": silent}, never, NOW).event_time
    assert held is not None and held.moves_in_ms is None and "never marks" in held.text
