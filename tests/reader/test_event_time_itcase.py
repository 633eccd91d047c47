"""The EventTimeITCase equivalent at core level, over a real store server.

Sensors A (on time), B (early) and C (late: a slow sensor) write readings; a
reader in the ingestion-time domain with a timestamp assigner on the ``ts``
field and a max event-time lag feeds the ordering helper, which must release
A's and B's readings in event-time order, each once, and report every C
reading late.

In the event-time domain each sensor asserts its own event time (seed 002):
the watermark waits for C and nothing is late; once C marks itself idle, or
the store times out a C that crashed, the watermark moves on without it, and
a reading C sends afterwards from its backlog is late, reported, never dropped.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.reader import FieldTimestampAssigner, ReaderConfig, ReaderGroupManager, TimeDomain
from examples.sensors import LAG_MS, LiveOrdering, run_sensors, write_asserting_round
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


# --- the event-time domain: the sensors assert their own event time (seed 002) -------------

SENSORS = ("A", "B", "C")
#: How long a writer may be silent before the store marks it idle, in these tests.
WRITER_TIMEOUT_MS = 3_000


class _Sensors:
    """A store, a stream, a writer per sensor and a live reader in the event-time domain."""

    def __init__(self, start_store: Any, clock: Any, group: str):
        self.clock = clock
        self.server = start_store(
            max_watermark_lag_ms=300, writer_idle_timeout_ms=WRITER_TIMEOUT_MS
        )
        self.client = StoreClient(self.server.uri)
        manager = StreamManager(self.client)
        manager.create_scope("itcase", exist_ok=True)
        manager.create_stream("itcase", group, 2)
        config = ReaderConfig(
            time_domain=TimeDomain.EVENT_TIME, timestamp_assigner=FieldTimestampAssigner("ts")
        )
        handle = ReaderGroupManager(self.client).create_reader_group(
            "itcase", group, [f"itcase/{group}"]
        )
        self.stream = f"itcase/{group}"
        self.reader = handle.create_reader("flink-like", JsonSerializer(), config)
        self.writers = {
            s: EventWriter(self.client, self.stream, JsonSerializer(), writer_id=f"sensor-{s}")
            for s in SENSORS
        }
        self.live = LiveOrdering(self.reader, self.let_time_pass)

    def let_time_pass(self) -> None:
        """What the store's background tasks do as time passes: idle ticks and timeouts."""
        self.clock.advance(400)
        self.server.store.advance_idle_segments()
        self.server.store.mark_silent_writers_idle()

    def rounds(self, seqs: range, sensors: tuple[str, ...] = SENSORS) -> None:
        for seq in seqs:
            written = write_asserting_round(self.writers, seq, self.clock.now_ms, sensors)
            self.live.output.written.extend(written)
            self.let_time_pass()
            self.live.read_all_written()

    def latest(self, sensor: str) -> int:
        return max(r["ts"] for r in self.live.output.written if r["sensor"] == sensor)

    def released_until(self, predicate: Any, what: str) -> None:
        self.live.read_until(lambda: predicate(self.live.output.released))

    def close(self) -> None:
        self.reader.close()
        self.client.close()


def test_with_writer_assertions_the_watermark_waits_for_the_slow_sensor_and_nothing_is_late(
    start_store, clock, caplog
) -> None:
    caplog.set_level(logging.DEBUG, logger="connector.reader.ordering")
    sensors = _Sensors(start_store, clock, "asserted")
    sensors.rounds(range(8))
    output = sensors.live.output
    slowest = sensors.latest("C")
    # The watermark waits for C: nothing above C's latest assertion was released.
    assert max(output.watermarks) <= slowest
    assert output.released == sorted(
        (r for r in output.written if r["ts"] <= max(output.watermarks)), key=lambda r: r["ts"]
    )
    assert [r for r in output.written if r["ts"] > slowest and r in output.released] == []
    for writer in sensors.writers.values():
        writer.close()  # idle: nobody holds the watermark any more, nobody moves it
    sensors.client.seal_stream("itcase", "asserted")  # the end: every reading is due
    sensors.live.read_until_settled()
    assert output.released == sorted(output.written, key=lambda r: (r["ts"], r["sensor"]))
    assert output.late == [] and sensors.live.flagged_late == []
    marks = output.watermarks
    assert all(a < b for a, b in zip(marks, marks[1:], strict=False))
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("Advancing the event time watermark: Watermark @ ") for m in messages)
    sensors.close()


def test_once_the_slow_sensor_marks_idle_the_watermark_moves_on_and_its_backlog_is_late(
    start_store, clock, caplog
) -> None:
    caplog.set_level(logging.DEBUG, logger="connector.reader.ordering")
    sensors = _Sensors(start_store, clock, "idle")
    sensors.rounds(range(4))
    sensors.writers["C"].mark_idle()
    sensors.rounds(range(4, 8), sensors=("A", "B"))
    output = sensors.live.output
    # The watermark moves on without C: every A reading is released (A is the least now).
    last_a = sensors.latest("A")
    sensors.live.read_until(lambda: any(r["ts"] == last_a for r in output.released))
    assert max(output.watermarks) == last_a

    def by_sensor(readings: list[dict[str, Any]]) -> list[tuple[str, int]]:
        return sorted((r["sensor"], r["seq"]) for r in readings if r["sensor"] in "AC")

    assert by_sensor(output.released) == by_sensor(output.written)
    # C comes back with a reading of its backlog: at or below the watermark, late, reported.
    backlog = write_asserting_round(sensors.writers, 8, clock.now_ms, ("C",))
    output.written.extend(backlog)
    sensors.live.read_all_written()
    assert sensors.live.flagged_late == backlog and output.late == backlog
    messages = [record.getMessage() for record in caplog.records]
    late_lines = [m for m in messages if m.startswith("Late record (reported, not dropped): (")]
    assert len(late_lines) == 1 and "'sensor': 'C'" in late_lines[0]
    sensors.close()


def test_a_crashed_slow_sensor_holds_the_watermark_only_until_the_store_times_it_out(
    start_store, clock
) -> None:
    sensors = _Sensors(start_store, clock, "crashed")
    sensors.rounds(range(3))
    held_at = sensors.latest("C")
    # C crashes: no more readings, no idle mark. A and B go on.
    sensors.rounds(range(3, 5), sensors=("A", "B"))
    output = sensors.live.output
    assert max(output.watermarks) <= held_at, "C holds the watermark while within its timeout"
    sensors.rounds(range(5, 5 + WRITER_TIMEOUT_MS // 400 + 2), sensors=("A", "B"))
    last_a = sensors.latest("A")
    sensors.live.read_until(lambda: any(r["ts"] == last_a for r in output.released))
    assert max(output.watermarks) > held_at
    assert sensors.live.flagged_late == []
    sensors.close()
