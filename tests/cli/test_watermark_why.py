"""``tidemarkctl watermarks --why``: hand-made stalls on a real server, each named correctly.

An idle segment (with idle ticks off, and with one due), a silent writer, a
segment nobody in the group reads and a blocked reader, on a synthetic
clock; the processing-time watermark and the diagnosis beside each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from click.testing import CliRunner

from connector import StoreClient, StreamManager
from connector.cli import cli
from connector.client.serializers import BytesSerializer
from connector.clock import ManualClock
from connector.reader.group import ReaderGroup, ReaderGroupManager
from connector.server import StoreServer
from tests.conftest import CLOCK_START_MS

pytestmark = pytest.mark.storages("file", "jetstream")

LEASE_MS = 600_000


def why(uri: str, *options: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli, ["--uri", uri, "--timeout", "2", "--json", "watermarks", "--why", "iot/g", *options]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture
def client(store_server: StoreServer) -> Iterator[StoreClient]:
    with StoreClient(store_server.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("iot")
        yield client


def group_over(client: StoreClient, segments: int) -> ReaderGroup:
    client.create_stream("iot", "s", segments)
    return ReaderGroupManager(client).create_reader_group("iot", "g", ["iot/s"])


def read_all(group: ReaderGroup, reader_id: str, count: int, lease_ms: int = LEASE_MS) -> Any:
    """A reader of ``group`` that has read ``count`` events and reported where it is."""
    reader = group.create_reader(
        reader_id, BytesSerializer(), lease_ms=lease_ms, sync_interval_ms=0
    )
    read = 0
    for _ in range(200):  # bounded
        read += reader.read_next_event(timeout_ms=20) is not None
        if read >= count:
            break
    assert read == count
    for _ in range(3):  # one more read at the tail reports the position there
        reader.read_next_event(timeout_ms=20)
    return reader


def test_an_idle_segment_waits_for_its_idle_tick_or_for_a_write_when_ticks_are_off(
    store_server: StoreServer, client: StoreClient, clock: ManualClock
) -> None:
    group = group_over(client, 1)
    client.append("iot/s/0", "w", 0, [b"a"])
    written = client.segment_info("iot/s/0").last_write_time
    with read_all(group, "r1", 1):
        clock.set(written + 4_000)
        due = why(store_server.uri)["ingestion_time"]
        assert (due["cause"], due["segment"], due["reader"]) == ("idle_tick_due", "iot/s/0", "r1")
        assert due["since"] == written
        assert due["moves_in_ms"] == 6_001 and "an idle tick is due in 6.0 s" in due["text"]

        off = why(store_server.uri, "--polling-period-ms", "0")["ingestion_time"]
        assert off["cause"] == "idle_ticks_off" and "only a write moves it" in off["text"]
        clock.advance(20_000)  # the tick is overdue: this server gives none
        overdue = why(store_server.uri)
        assert overdue["ingestion_time"]["cause"] == "idle_ticks_off"
        assert "overdue" in overdue["ingestion_time"]["text"]
        # Nothing unread, and the segment's watermark stands still.
        assert overdue["unread_events"] == 0
        assert overdue["processing_time_delay_ms"] == 24_001
        assert overdue["event_time"] is None  # no writer asserts event time
        assert overdue["diagnosis"] == "healthy"  # 24 s: not above 30 s
        assert why(store_server.uri, "--large-delay-ms", "10000")["diagnosis"] == (
            "watermark_stands_still"
        )


def test_a_silent_writer_holds_the_event_time_until_it_is_marked_idle(
    store_server: StoreServer, client: StoreClient, clock: ManualClock
) -> None:
    group = group_over(client, 1)
    client.assert_watermark("iot", "s", "sensor-a", 0, CLOCK_START_MS - 1_000)
    client.assert_watermark("iot", "s", "sensor-c", 0, CLOCK_START_MS - 5_000)
    client.append("iot/s/0", "sensor-a", 0, [b"a"])
    writers = {w.writer_id: w for w in client.segment_info("iot/s/0").writers}
    with read_all(group, "r1", 1):
        clock.set(writers["sensor-c"].last_seen + 45_000)
        client.assert_watermark("iot", "s", "sensor-a", 1, CLOCK_START_MS + 44_000)
        found = why(store_server.uri)
        held = found["event_time"]
        assert (held["cause"], held["writer"], held["segment"]) == (
            "silent_writer",
            "sensor-c",
            "iot/s/0",
        )
        assert held["watermark"] == CLOCK_START_MS - 5_000
        assert "silent for 45.0 s, marked idle at 60.0 s (in 15.0 s)" in held["text"]
        assert held["moves_in_ms"] == 15_000
        # Old data, the pipeline keeping up: the event time is 50 s behind, nothing unread.
        assert found["event_time_delay_ms"] == clock.now_ms() - (CLOCK_START_MS - 5_000)
        assert found["processing_time_delay_ms"] < 30_000
        assert found["diagnosis"] == "data_old_or_buffered"


def test_a_segment_nobody_in_the_group_reads_is_named(
    store_server: StoreServer, client: StoreClient, clock: ManualClock
) -> None:
    group = group_over(client, 2)
    clock.advance(1_000)
    client.append("iot/s/1", "w", 0, [b"a", b"b"])
    # A reader holds segment 0 only: segment 1 is left to no one.
    group.update(
        lambda record, now: replace(
            record, assignments={"iot/s/0": "r1"}, leases={"r1": now + LEASE_MS}
        )
    )
    clock.advance(2_000)
    found = why(store_server.uri)
    held = found["ingestion_time"]
    assert (held["cause"], held["segment"], held["reader"]) == ("unread_segment", "iot/s/1", None)
    assert "a segment nobody in the group reads: iot/s/1" in held["text"]
    assert found["unread_events"] == 2
    assert found["processing_time_watermark"] == CLOCK_START_MS - 1  # segment 0: empty


def test_a_blocked_reader_is_named_with_its_unread_events_and_its_lease(
    store_server: StoreServer, client: StoreClient, clock: ManualClock
) -> None:
    group = group_over(client, 1)
    client.append("iot/s/0", "w", 0, [b"a"])
    clock.advance(1_000)
    client.append("iot/s/0", "w", 1, [b"b", b"c"])
    reader = group.create_reader("r1", BytesSerializer(), lease_ms=30_000, sync_interval_ms=0)
    with reader:
        # It takes one event (the store answers the first append alone) and stops.
        assert reader.read_next_event(timeout_ms=1_000) is not None
        reader.read_next_event(timeout_ms=0)
        unread = ReaderGroupManager(client).get_reader_group("iot", "g")
        stuck = {s: c.offset for s, c in unread.record().state.cursors.items()}
        assert stuck["iot/s/0"] > 0
        clock.advance(20_000)
        found = why(store_server.uri, "--large-delay-ms", "10000")
        held = found["ingestion_time"]
        assert (held["cause"], held["segment"], held["reader"]) == (
            "reader_behind",
            "iot/s/0",
            "r1",
        )
        assert found["unread_events"] in (1, 2)
        assert held["since"] == CLOCK_START_MS + 1_000  # the oldest unread event's ingestion
        assert "lease lapses in" in held["text"] and held["moves_in_ms"] <= 30_000
        assert found["processing_time_delay_ms"] == 20_001
        assert found["diagnosis"] == "blocked_or_slow"
        clock.advance(30_000)  # its lease lapses: another reader would take the segment
        lapsed = why(store_server.uri)["ingestion_time"]
        assert lapsed["cause"] == "lease_lapsed" and "another reader takes it" in lapsed["text"]
