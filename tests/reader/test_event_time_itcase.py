"""The EventTimeITCase equivalent at core level, over a real store server.

Sensors A (on time), B (early) and C (late) write readings; a reader in the
ingestion-time domain with a timestamp assigner on the ``ts`` field and a max
event-time lag feeds the ordering helper, which must release A's and B's
readings in event-time order, each once, and report every C reading late.
"""

from __future__ import annotations

import logging

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.reader import FieldTimestampAssigner, ReaderConfig, ReaderGroupManager, TimeDomain
from examples.sensors import LAG_MS, run_sensors
from tests.conftest import wait_until

pytestmark = pytest.mark.storages("file", "jetstream")


def test_on_time_and_early_readings_come_out_in_event_time_order_and_late_ones_are_discarded(
    start_store, clock, caplog
) -> None:
    caplog.set_level(logging.DEBUG, logger="connector.reader.ordering")
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("itcase")
    StreamManager(client).create_stream("itcase", "sensors", 2)
    config = ReaderConfig(
        time_domain=TimeDomain.INGESTION_TIME,
        timestamp_assigner=FieldTimestampAssigner("ts"),
        max_event_time_lag=LAG_MS,
    )
    group = ReaderGroupManager(client).create_reader_group("itcase", "g", ["itcase/sensors"])
    reader = group.create_reader("flink-like", JsonSerializer(), config)

    def let_time_pass() -> None:
        clock.advance(400)
        server.store.advance_idle_segments()

    # The reader is live: it has seen the idle streams' watermark before the sensors write.
    for _ in range(25):
        let_time_pass()
    caught_up = clock.now_ms() - 400 - 1 - LAG_MS
    wait_until(
        lambda: (reader.read_next_event(20), (reader.last_watermark or 0) >= caught_up)[1],
        what="the reader to see the idle watermark",
    )
    with EventWriter(client, "itcase/sensors", JsonSerializer()) as writer:
        output = run_sensors(writer, reader, clock.now_ms, let_time_pass, rounds=8)
    written = output.written

    on_time_and_early = [r for r in written if r["sensor"] in "AB"]
    assert output.released == sorted(on_time_and_early, key=lambda r: r["ts"])
    assert sorted(output.late, key=lambda r: r["seq"]) == [r for r in written if r["sensor"] == "C"]
    marks = output.watermarks
    assert all(a < b for a, b in zip(marks, marks[1:], strict=False))
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("Advancing the event time watermark: Watermark @ ") for m in messages)
    late_lines = [m for m in messages if m.startswith("Late record (reported, not dropped): (")]
    assert len(late_lines) == 8 and all("'sensor': 'C'" in m for m in late_lines)
    reader.close()
    client.close()
