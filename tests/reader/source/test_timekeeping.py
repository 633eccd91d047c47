"""The time rules of the reader core, once: a watermark rises or not, an event is late or not."""

from __future__ import annotations

import pytest

from connector.errors import InvalidArgumentError
from connector.groups.state import (
    NO_WRITER,
    GroupState,
    Successor,
    advance,
    finish,
    group_event_time,
)
from connector.model import initial_watermark
from connector.reader.events import TimeDomain
from connector.reader.source import (
    EventTime,
    IngestionTime,
    ProcessingTime,
    TimeKeeping,
    is_late,
    rose,
)
from connector.timestamps import END_OF_TIME, FieldTimestampAssigner


def at(watermark: int) -> GroupState:
    return GroupState.starting_at({"s/t/0": 0}, {"s/t/0": watermark})


def test_the_ingestion_time_watermark_subtracts_the_lag_and_only_rises() -> None:
    time = IngestionTime(max_event_time_lag_ms=100)
    assert time.emitted(at(1000), None) == 900
    assert time.emitted(at(1000), 900) is None
    assert time.emitted(at(1001), 900) == 901
    assert time.emitted(GroupState(), 901) == END_OF_TIME  # done: the end of time passes
    assert time.advanced(at(1000), 950) == 950  # a frontier's watermark never steps back
    assert time.advanced(at(1100), 950) == 1000


def test_the_processing_time_domain_has_no_watermark_and_nothing_is_late() -> None:
    time = ProcessingTime()
    assert time.emitted(at(1000), None) is None and time.advanced(at(1000), None) is None
    assert not time.has_watermarks
    assert is_late(5, None) is False


def test_an_event_is_late_at_or_below_the_watermark_and_rises_are_strict() -> None:
    assert is_late(100, 100) and is_late(99, 100) and not is_late(101, 100)
    assert not is_late(0, None)
    assert rose(1, None) and rose(2, 1) and not rose(1, 1) and not rose(None, 1)
    assert initial_watermark(1_000) == 999


def test_time_keeping_of_a_domain_takes_its_assigner_and_lag() -> None:
    field = FieldTimestampAssigner("ts")
    assert TimeKeeping.of(TimeDomain.INGESTION_TIME, field, 5) == IngestionTime(field, 5)
    assert TimeKeeping.of("ProcessingTime", field) == ProcessingTime(field)
    assert not ProcessingTime(field).event_time_is_ingestion_time
    assert IngestionTime().event_time_is_ingestion_time
    with pytest.raises(InvalidArgumentError, match="needs a domain with watermarks"):
        TimeKeeping.of(TimeDomain.PROCESSING_TIME, None, 5)
    with pytest.raises(InvalidArgumentError, match="-1"):
        IngestionTime(max_event_time_lag_ms=-1)


def _writers(*event_times: int | None) -> GroupState:
    """A group of segments whose writers' event times are known (NO_WRITER: none holds it)."""
    return GroupState.starting_at(
        {f"s/t/{n}": 0 for n in range(len(event_times))},
        {f"s/t/{n}": 0 for n in range(len(event_times))},
        event_times={f"s/t/{n}": t for n, t in enumerate(event_times) if t is not None},
    )


def test_the_event_time_watermark_is_the_least_of_the_writers_and_skips_segments_nobody_holds() -> (
    None
):
    time = EventTime(FieldTimestampAssigner("ts"))
    assert time.watermark(_writers(500, 300)) == 300
    assert time.watermark(_writers(500, NO_WRITER)) == 500  # nobody holds segment 1 back
    assert time.watermark(_writers(NO_WRITER, NO_WRITER)) is None  # nobody asserts: no watermark
    assert time.watermark(_writers(500, None)) is None  # segment 1 not read yet: it holds back
    assert time.watermark(GroupState()) == END_OF_TIME  # done
    assert EventTime(FieldTimestampAssigner("ts"), 50).watermark(_writers(500)) == 450
    # A reader's own, newer positions count instead of the state's, also when lower.
    assert time.watermark(_writers(500, 300), {"s/t/1": 700}) == 500
    assert time.watermark(_writers(500, 300), {"s/t/0": 200}) == 200


def test_the_event_time_watermark_a_reader_yields_only_rises_when_a_writer_joins_below() -> None:
    time = EventTime(FieldTimestampAssigner("ts"))
    assert time.emitted(_writers(500), None) == 500
    assert time.emitted(_writers(300), 500) is None  # a writer joined at 300: no fall, no rise
    assert time.advanced(_writers(300), 500) == 500
    assert time.emitted(_writers(600), 500) == 600


def test_the_event_time_domain_needs_a_timestamp_assigner() -> None:
    with pytest.raises(InvalidArgumentError, match="timestamp assigner"):
        TimeKeeping.of(TimeDomain.EVENT_TIME)
    field = FieldTimestampAssigner("ts")
    assert TimeKeeping.of("EventTime", field, 5) == EventTime(field, 5)
    assert TimeDomain.parse("event_time") is TimeDomain.EVENT_TIME


def test_event_times_move_with_offsets_fall_and_pass_to_successors() -> None:
    state = _writers(500, 300)
    state = advance(state, "s/t/0", 10, 0, 200)  # a writer joined below: it may fall
    assert state.cursors["s/t/0"].event_time == 200
    state = advance(state, "s/t/0", 5, 0, 900)  # a stale report changes nothing
    assert state.cursors["s/t/0"].event_time == 200
    state = advance(state, "s/t/0", 20, 0)  # further, not known there
    assert state.cursors["s/t/0"].event_time is None
    state = advance(state, "s/t/0", 20, 0, 250)
    merged = Successor("s/t/2", ("s/t/0", "s/t/1"), 1_000)
    state = finish(state, "s/t/0", [merged])
    assert state.waiting["s/t/2"].event_time == 250  # the least its finished predecessors had
    assert group_event_time(state) == 250
    state = finish(state, "s/t/1", [merged])
    assert state.cursors["s/t/2"].event_time == 250
    assert GroupState.from_json(state.to_json()) == state
    old_form = {"cursors": {"s/t/2": [0, 999, None]}, "waiting": {}, "finished": []}
    assert GroupState.from_dict(old_form).cursors["s/t/2"].event_time is None
