"""The time rules of the reader core, once: a watermark rises or not, an event is late or not."""

from __future__ import annotations

import pytest

from connector.errors import InvalidArgumentError
from connector.model import initial_watermark
from connector.reader.events import END_OF_TIME, TimeDomain
from connector.reader.group_state import GroupState
from connector.reader.source import IngestionTime, ProcessingTime, TimeKeeping, is_late, rose
from connector.reader.timestamps import FieldTimestampAssigner


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
    with pytest.raises(InvalidArgumentError, match="needs the ingestion-time domain"):
        TimeKeeping.of(TimeDomain.PROCESSING_TIME, None, 5)
    with pytest.raises(InvalidArgumentError, match="-1"):
        IngestionTime(max_event_time_lag_ms=-1)
