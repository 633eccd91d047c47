"""Percentile watermarks in a reader group, on a real server and a synthetic clock.

A straggler segment (ingestion time: its events far older than the
others') and a straggler writer (event time: one writer of ten asserting
far behind): at p = 0.9 the watermark passes the straggler, whose events
come out late and counted; at p = 1 it waits for it and nothing is late.
"""

from __future__ import annotations

import itertools

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient
from connector.reader import ReaderConfig, ReaderGroupManager, TimeDomain
from connector.timestamps import FieldTimestampAssigner
from tests.conftest import new_stream_in
from tests.reader.conftest import ReadLog, drain, read_some

pytestmark = pytest.mark.storages("file", "jetstream")

_groups = itertools.count()
SEGMENTS = 10
EVENTS = 5


def _straggler_segment(server, client: StoreClient, clock) -> tuple[str, int]:
    """Ten segments: the first's 5 events a minute older than the 45 of the others."""
    stream = new_stream_in(client, SEGMENTS)
    segments = [f"{stream}/{number}" for number in range(SEGMENTS)]
    client.append(segments[0], "straggler", 0, [b'{"n": 0}'] * EVENTS)
    clock.advance(60_000)
    server.store.advance_idle_segments()
    fresh = clock.now_ms()
    for segment in segments[1:]:
        client.append(segment, "others", 0, [b'{"n": 1}'] * EVENTS)
    return stream, fresh


@pytest.mark.parametrize("percentile", [0.9, 1.0])
def test_a_straggler_segment_comes_out_late_below_percentile_one(
    storage, store_server, store_client, clock, percentile
) -> None:
    stream, fresh = _straggler_segment(store_server, store_client, clock)
    group = ReaderGroupManager(store_client).create_reader_group(
        stream.split("/")[0], f"g{next(_groups)}", [stream]
    )
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME, watermark_percentile=percentile)
    log = ReadLog()
    with group.create_reader("r", JsonSerializer(), config) as reader:
        drain([(reader, log)], SEGMENTS * EVENTS)
        late = [e for e in log.events if e.late]
        if percentile == 1.0:
            assert not late
            assert reader.late_count.late == 0
            return
        # The others' windows close before any straggler event is read: the first read.
        assert log.reads[0].is_watermark
        assert log.reads[0].watermark >= fresh - 1
        assert {e.position.segment.endswith("/0") for e in late} == {True}
        assert len(late) == EVENTS
        assert reader.late_count.late == EVENTS
        assert reader.late_count.fraction == pytest.approx(0.1)
    marks = log.watermarks
    assert all(a < b for a, b in zip(marks, marks[1:], strict=False))


@pytest.mark.parametrize("percentile", [0.9, 1.0])
def test_a_straggler_writer_comes_out_late_below_percentile_one(
    storage, store_client, percentile
) -> None:
    stream = new_stream_in(store_client)
    writers = [EventWriter(store_client, stream, JsonSerializer()) for _ in range(10)]
    for i, writer in enumerate(writers):
        writer.write_event({"t": 500 if i == 0 else 59_000})
        writer.flush()
        writer.note_time(1_000 if i == 0 else 60_000)  # writer 0 straggles a minute behind
    group = ReaderGroupManager(store_client).create_reader_group(
        stream.split("/")[0], f"g{next(_groups)}", [stream]
    )
    config = ReaderConfig(
        time_domain=TimeDomain.EVENT_TIME,
        timestamp_assigner=FieldTimestampAssigner("t"),
        watermark_percentile=percentile,
    )
    log = ReadLog()
    with group.create_reader("r", JsonSerializer(), config) as reader:
        drain([(reader, log)], 10)
        expected = 60_000 if percentile < 1 else 1_000  # 9 of 10 writers asserted 60 s
        for _ in range(20):  # the watermark comes with a sync after the events
            read_some(reader, log, 5)
            if log.watermarks and log.watermarks[-1] == expected:
                break
        assert log.watermarks[-1] == expected
        writers[0].write_event({"t": 1_500})  # kept its promise: after 1000
        writers[1].write_event({"t": 61_000})
        for writer in writers[:2]:
            writer.flush()
        drain([(reader, log)], 12)
        late = [e.event["t"] for e in log.events if e.late]
        assert late == ([1_500] if percentile < 1 else [])
        assert reader.late_count.late == len(late)


#: The backlog's events a segment (both storages answer the work through the same front).
BACKLOG = 40


def _backlog_readers(client: StoreClient, clock, segments: int, readers: int) -> list:
    """Readers at p = 0.9 syncing at every read, of ``segments - 1`` backlogs and a fresh segment.

    Each backlog: 40 events 10 ms apart; then one event in the last segment.
    """
    stream = new_stream_in(client, segments)
    for n in range(BACKLOG):
        clock.advance(10)
        for number in range(segments - 1):
            client.append(f"{stream}/{number}", "backlog", n, [b'{"n": 0}'])
    clock.advance(10)
    client.append(f"{stream}/{segments - 1}", "fresh", 0, [b'{"n": 1}'])
    group = ReaderGroupManager(client).create_reader_group(
        stream.split("/")[0], f"g{next(_groups)}", [stream]
    )
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME, watermark_percentile=0.9)
    return [
        group.create_reader(f"r{n}", JsonSerializer(), config, sync_interval_ms=0)
        for n in range(readers)
    ]


@pytest.mark.storages("file")
def test_a_backlog_read_over_many_syncs_comes_out_late_within_one_minus_p(
    storage, store_client, clock
) -> None:
    """The compounding case: a sync after every read (each sync's rule alone: 12 of 41 late)."""
    [reader] = _backlog_readers(store_client, clock, 2, 1)
    log = ReadLog()
    with reader:
        drain([(reader, log)], BACKLOG + 1)
        late = reader.late_count
        assert late.events == BACKLOG + 1
        assert 1 <= late.late <= 0.1 * late.events  # it passes work, within 1 - p of all of it
    marks = log.watermarks
    assert all(a < b for a, b in zip(marks, marks[1:], strict=False))


@pytest.mark.storages("file")
def test_two_readers_of_a_group_share_the_allowance_not_spend_it_twice(
    storage, store_client, clock
) -> None:
    """Each reader bounds the late share of the events it reads, so the group's stays bounded."""
    readers = _backlog_readers(store_client, clock, 3, 2)
    logs = [ReadLog(), ReadLog()]
    try:
        drain(zip(readers, logs, strict=True), 2 * BACKLOG + 1)
        late = sum(r.late_count.late for r in readers)
        events = sum(r.late_count.events for r in readers)
        assert events == 2 * BACKLOG + 1
        assert late <= 0.1 * events
    finally:
        for reader in readers:
            reader.close()
