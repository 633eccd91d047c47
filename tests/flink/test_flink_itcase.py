"""The EventTimeITCase equivalent on PyFlink: sensors A (on time), B (early), C (late).

A real store server (synthetic clock) and a real PyFlink mini-cluster at
parallelism 2: the source's group watermarks are Flink's event time, the
ordering function releases A's and B's readings in event-time order per
sensor, and every C reading reaches the late side output. Each once.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pyflink.common import Types
from pyflink.datastream.functions import ProcessFunction

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from examples.sensors import LAG_MS, write_round
from flink_adapter import (
    LATE_EVENTS,
    EventTimeOrderingFunction,
    FlinkTidemarkReader,
    StartPosition,
    TimeDomain,
)
from tests.flink.collect import Collected

pytestmark = pytest.mark.slow

_log = logging.getLogger("tests.flink")


class _Released(ProcessFunction):
    """Tags released rows with the watermark in force when they came out."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield json.dumps(
            {"kind": "released", "event": value[1], "wm": ctx.timer_service().current_watermark()}
        )


def _count(kind: str, sensor: str | None = None) -> Any:
    def predicate(rows: list[dict[str, Any]]) -> int:
        return sum(
            1
            for r in rows
            if r["kind"] == kind and (sensor is None or json.loads(r["event"])["sensor"] == sensor)
        )

    return predicate


def test_on_time_and_early_readings_come_out_in_event_time_order_and_late_ones_aside(
    start_store, clock, flink_env
) -> None:
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("itcase")
    StreamManager(client).create_stream("itcase", "sensors", 2)

    def let_time_pass() -> None:
        clock.advance(400)
        server.store.advance_idle_segments()

    for _ in range(25):  # the streams have been idle: their watermark is near now
        let_time_pass()

    reader = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("itcase/sensors", start=StartPosition.earliest())
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(LAG_MS)
        .with_parallelism(2)
        .build()
    )
    readings = reader.create_stream(flink_env)
    ordered = readings.key_by(
        lambda row: json.loads(row[1])["sensor"], key_type=Types.STRING()
    ).process(EventTimeOrderingFunction(), output_type=reader.output_type())
    released = ordered.process(_Released(), output_type=Types.STRING())
    late = ordered.get_side_output(LATE_EVENTS).map(
        lambda row: json.dumps({"kind": "late", "event": row[1]}), output_type=Types.STRING()
    )
    with released.union(late).execute_and_collect() as results:
        output = Collected(results)
        with EventWriter(client, "itcase/sensors", JsonSerializer()) as writer:
            warm_up = {"sensor": "W", "seq": -1, "ts": clock.now_ms() - 1_500}
            writer.write_event(warm_up, routing_key="W")
            writer.flush()
            let_time_pass()
            # W comes out released or late: either way the job's watermark is established.
            output.wait_for(lambda rows: len(rows) >= 1, "the warm-up reading")
            written = []
            for seq in range(8):
                written += write_round(writer, seq, clock.now_ms)
                let_time_pass()
                output.wait_for(
                    lambda rows, n=seq + 1: _count("late", "C")(rows) >= n,
                    f"round {seq}'s C reading reported late",
                )
        for _ in range(20):
            let_time_pass()
            try:
                output.wait_for(
                    lambda rows: (
                        _count("released", "A")(rows) + _count("released", "B")(rows) >= 16
                    ),
                    "A and B released",
                    timeout=2,
                )
                break
            except AssertionError:
                continue
        output.wait_for(
            lambda rows: _count("released", "A")(rows) + _count("released", "B")(rows) >= 16,
            "A and B released",
        )
    rows = [dict(r, event=json.loads(r["event"])) for r in output.rows]
    by_sensor: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["kind"] == "released" and row["event"]["sensor"] in "AB":
            by_sensor.setdefault(row["event"]["sensor"], []).append(row["event"])
    for sensor in "AB":
        expected = [r for r in written if r["sensor"] == sensor]
        assert by_sensor[sensor] == sorted(expected, key=lambda r: r["ts"]), sensor
        _log.info("Sensor %s in event-time order: %s", sensor, [r["ts"] for r in by_sensor[sensor]])
    late_c = sorted(
        (r["event"] for r in rows if r["kind"] == "late" and r["event"]["sensor"] == "C"),
        key=lambda r: r["seq"],
    )
    assert late_c == [r for r in written if r["sensor"] == "C"]
    assert not any(r["kind"] == "late" and r["event"]["sensor"] in "AB" for r in rows)
    marks = [r["wm"] for r in rows if r["kind"] == "released"]
    assert marks == sorted(marks)
    client.close()
