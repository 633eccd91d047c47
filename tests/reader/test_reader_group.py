"""Reader groups over a real store server: balancing, leases, checkpoints, resets, bounds."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.errors import InvalidArgumentError
from connector.reader import (
    END_OF_TIME,
    FieldTimestampAssigner,
    ReaderConfig,
    ReaderGroupManager,
    ReaderGroupResetError,
    TimeDomain,
)
from tests.conftest import wait_until
from tests.reader.conftest import ReadLog, drain, read_some

pytestmark = pytest.mark.storages("file", "jetstream")

INGESTION = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)


def write(
    client: StoreClient, stream: str, clock: ManualClock, keys: int, per_key: int, start: int = 0
) -> None:
    with EventWriter(client, stream, JsonSerializer()) as writer:
        for i in range(start, start + per_key):
            for key in range(keys):
                writer.write_event({"key": key, "n": i}, routing_key=f"k{key}")
            writer.flush()
            clock.advance(5)


def test_processing_time_readers_never_see_a_watermark(store_client, new_stream, clock) -> None:
    stream = new_stream(2)
    write(store_client, stream, clock, keys=4, per_key=5)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "pt", [stream])
    reader = group.create_reader("r", JsonSerializer())
    log = ReadLog()
    drain([(reader, log)], expected=20)
    read_some(reader, log, 5, timeout_ms=50)
    assert log.watermarks == []
    assert sorted((r.event["key"], r.event["n"]) for r in log.reads) == [
        (k, n) for k in range(4) for n in range(5)
    ]
    reader.close()


def test_ingestion_time_readers_yield_ascending_watermarks_behind_every_later_event(
    store_client, new_stream, clock
) -> None:
    stream = new_stream(3)
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME, max_event_time_lag=7)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "it", [stream])
    reader = group.create_reader("r", JsonSerializer(), config)
    log = ReadLog()
    write(store_client, stream, clock, keys=6, per_key=10)
    drain([(reader, log)], expected=60)
    log.assert_watermark_rules(lag_ms=7)
    assert len(log.watermarks) >= 2
    # Per routing key, the order written.
    for key in range(6):
        assert [r.event["n"] for r in log.events if r.event["key"] == key] == list(range(10))
    reader.close()


def test_a_joining_reader_gets_a_share_and_a_leaving_one_gives_its_segments_back(
    store_client, new_stream, clock
) -> None:
    stream = new_stream(4)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "share", [stream])
    first = group.create_reader("first", JsonSerializer(), INGESTION, sync_interval_ms=0)
    assert len(first.segments) == 4
    second = group.create_reader("second", JsonSerializer(), INGESTION, sync_interval_ms=0)
    logs = {"first": ReadLog(), "second": ReadLog()}
    write(store_client, stream, clock, keys=8, per_key=5)
    read_some(first, logs["first"], 3)
    read_some(second, logs["second"], 3)
    wait_until(
        lambda: (read_some(first, logs["first"], 1), len(first.segments) == 2)[1], what="rebalance"
    )
    assert sorted(first.segments + second.segments) == sorted(
        s.segment for s in store_client.describe_stream(*stream.split("/")).segments
    )
    read_some(second, logs["second"], 7)
    second.close()
    write(store_client, stream, clock, keys=8, per_key=5, start=5)
    drain([(first, logs["first"])], expected=80 - len(logs["second"].events))
    events = [(r.event["key"], r.event["n"]) for log in logs.values() for r in log.events]
    assert sorted(events) == [(k, n) for k in range(8) for n in range(10)], "lost or duplicated"
    assert len(first.segments) == 4
    for log in logs.values():
        log.assert_watermark_rules(lag_ms=0)
    first.close()


def test_a_reader_whose_lease_expires_loses_its_segments(store_client, new_stream, clock) -> None:
    stream = new_stream(2)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "lease", [stream])
    quiet = group.create_reader("quiet", JsonSerializer(), lease_ms=1_000, sync_interval_ms=0)
    busy = group.create_reader("busy", JsonSerializer(), lease_ms=60_000, sync_interval_ms=0)
    read_some(quiet, ReadLog(), 1, timeout_ms=1)
    read_some(busy, ReadLog(), 1, timeout_ms=1)
    assert len(busy.segments) == 1
    clock.advance(1_001)
    wait_until(
        lambda: (read_some(busy, ReadLog(), 1, 1), len(busy.segments) == 2)[1], what="takeover"
    )
    assert "quiet" not in group.record().leases


def test_a_checkpoint_is_a_consistent_cut_and_a_reset_to_it_rereads_exactly_what_follows(
    store_client, new_stream, clock
) -> None:
    stream = new_stream(2)
    write(store_client, stream, clock, keys=4, per_key=5)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "ckpt", [stream])
    reader = group.create_reader("r", JsonSerializer(), sync_interval_ms=0)
    before = ReadLog()
    drain([(reader, before)], expected=20)
    stop = threading.Event()
    reading = threading.Thread(
        target=lambda: [reader.read_next_event(10) for _ in iter(stop.is_set, True)]
    )
    reading.start()
    try:
        cut = group.initiate_checkpoint("after-first-20", timeout_s=10)
    finally:
        stop.set()
        reading.join()
    write(store_client, stream, clock, keys=4, per_key=5, start=5)
    group.reset_to(cut)
    with pytest.raises(ReaderGroupResetError, match="reset"):
        reader.read_next_event(10)
    fresh = group.create_reader("fresh", JsonSerializer())
    after = ReadLog()
    drain([(fresh, after)], expected=20)
    read_some(fresh, after, 3, timeout_ms=30)
    assert sorted((r.event["key"], r.event["n"]) for r in after.events) == [
        (k, n) for k in range(4) for n in range(5, 10)
    ]
    fresh.close()


def test_a_bounded_group_stops_at_its_end_cut_with_a_final_watermark(
    store_client, new_stream, clock
) -> None:
    stream = new_stream(1)
    write(store_client, stream, clock, keys=1, per_key=3)
    segment = f"{stream}/0"
    end = {segment: store_client.segment_info(segment).write_offset}
    write(store_client, stream, clock, keys=1, per_key=3, start=3)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "bounded", [stream], end=end)
    reader = group.create_reader("r", JsonSerializer(), INGESTION)
    log = ReadLog()
    drain([(reader, log)], expected=3)
    read_some(reader, log, 5, timeout_ms=20)
    assert [r.event["n"] for r in log.events] == [0, 1, 2]
    assert log.watermarks[-1] == END_OF_TIME
    assert reader.read_next_event(10) is None


def test_idle_segments_keep_the_group_watermark_moving(
    store_server, store_client, new_stream, clock
) -> None:
    stream = new_stream(2)
    write(store_client, stream, clock, keys=2, per_key=1)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "idle", [stream])
    reader = group.create_reader("r", JsonSerializer(), INGESTION)
    log = ReadLog()
    drain([(reader, log)], expected=2)
    read_some(reader, log, 3, timeout_ms=20)
    before = reader.last_watermark
    clock.advance(store_server.store.config.max_watermark_lag_ms + 1)
    assert store_server.store.advance_idle_segments() == 2
    ticked = clock.now_ms() - 1  # both segments' watermark after their idle tick
    wait_until(
        lambda: (read_some(reader, log, 1, 20), reader.last_watermark == ticked)[1],
        what=f"the reader's watermark to move from {before} to {ticked}",
    )
    assert log.events and len(log.events) == 2  # no event appeared: the watermark moved alone


def test_a_split_during_reading_keeps_each_keys_order(store_client, new_stream, clock) -> None:
    stream = new_stream(1)
    scope, name = stream.split("/")
    group = ReaderGroupManager(store_client).create_reader_group("rt", "split", [stream])
    reader = group.create_reader("r", JsonSerializer(), INGESTION)
    log = ReadLog()
    write(store_client, stream, clock, keys=5, per_key=4)
    read_some(reader, log, 7)
    StreamManager(store_client).split_segment(scope, name, 0, 3)
    write(store_client, stream, clock, keys=5, per_key=4, start=4)
    drain([(reader, log)], expected=40)
    for key in range(5):
        assert [r.event["n"] for r in log.events if r.event["key"] == key] == list(range(8))
    log.assert_watermark_rules(lag_ms=0)


def test_the_timestamp_assigner_gives_events_their_event_time(
    store_client, new_stream, clock
) -> None:
    stream = new_stream(1)
    with EventWriter(store_client, stream, JsonSerializer()) as writer:
        writer.write_event({"ts": 1234, "v": 1})
    group = ReaderGroupManager(store_client).create_reader_group("rt", "ts", [stream])
    config = ReaderConfig(timestamp_assigner=FieldTimestampAssigner("ts"))
    reader = group.create_reader("r", JsonSerializer(), config)
    log = ReadLog()
    drain([(reader, log)], expected=1)
    assert log.events[0].event_time == 1234
    assert log.events[0].ingestion_time >= clock.now_ms()


def test_bad_reader_settings_name_the_value(store_client, new_stream) -> None:
    stream = new_stream(1)
    with pytest.raises(InvalidArgumentError, match="'Sundial'"):
        ReaderConfig(time_domain="Sundial")
    with pytest.raises(InvalidArgumentError, match="-5"):
        ReaderConfig(max_event_time_lag=-5)
    with pytest.raises(InvalidArgumentError, match="nope/x/0"):
        ReaderGroupManager(store_client).create_reader_group(
            "rt", "bad", [stream], start={"nope/x/0": 0}
        )
    with pytest.raises(InvalidArgumentError, match="reader group"):
        ReaderGroupManager(store_client).create_reader_group("rt", "bad name!", [stream])
    group: Any = ReaderGroupManager(store_client).create_reader_group("rt", "ok", [stream])
    with pytest.raises(InvalidArgumentError, match="''"):
        group.create_reader("", JsonSerializer())


def test_a_merge_keeps_each_keys_order(store_client, new_stream, clock) -> None:
    from connector.client import key_position

    stream = new_stream(2)
    scope, name = stream.split("/")
    # One key in each half of the key space: "busy" has many events, "brief" one.
    # Busy events are large, so its predecessor takes several reads to drain.
    pad = "x" * 300_000
    keys = [f"key-{i}" for i in range(100)]
    busy = next(k for k in keys if key_position(k) >= 0.5)
    brief = next(k for k in keys if key_position(k) < 0.5)
    with EventWriter(store_client, stream, JsonSerializer()) as writer:
        writer.write_event({"key": brief, "n": 0}, routing_key=brief)
        for n in range(30):
            writer.write_event({"key": busy, "n": n, "pad": pad}, routing_key=busy)
    StreamManager(store_client).merge_segments(scope, name, [0, 1])
    with EventWriter(store_client, stream, JsonSerializer()) as writer:
        for n in range(30, 60):
            writer.write_event({"key": busy, "n": n, "pad": pad}, routing_key=busy)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "merge", [stream])
    reader = group.create_reader("r", JsonSerializer(), INGESTION, sync_interval_ms=0)
    log = ReadLog()
    drain([(reader, log)], expected=61)
    assert [r.event["n"] for r in log.events if r.event["key"] == busy] == list(range(60))
    log.assert_watermark_rules(lag_ms=0)
