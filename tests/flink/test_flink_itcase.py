"""The EventTimeITCase equivalent on PyFlink: sensors A (on time), B (early), C (late).

A real store server (synthetic clock) and a real PyFlink mini-cluster at
parallelism 2: the source's group watermarks are Flink's event time, the
ordering function releases A's and B's readings in event-time order per
sensor, and every C reading reaches the late side output. Each once.
"""

from __future__ import annotations

import logging

import pytest

from connector import StoreClient, StreamManager
from examples.flink_event_time import log_run, run_sensors_on_flink
from examples.sensors import OFFSETS_MS
from tests.demo_output import check_demo_lines

pytestmark = pytest.mark.slow

_log = logging.getLogger("tests.flink")


@pytest.mark.storages("file", "jetstream")
def test_on_time_and_early_readings_come_out_in_event_time_order_and_late_ones_aside(
    start_store, clock, flink_env
) -> None:
    """Runs the demo's own code (:func:`examples.flink_event_time.run_sensors_on_flink`)."""
    server = start_store(max_watermark_lag_ms=300)
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("itcase")
        StreamManager(client).create_stream("itcase", "sensors", 2)

    def let_time_pass() -> None:
        clock.advance(400)
        server.store.advance_idle_segments()

    for _ in range(25):  # the streams have been idle: their watermark is near now
        let_time_pass()

    run = run_sensors_on_flink(
        flink_env, server.uri, "itcase/sensors", clock.now_ms, pause=let_time_pass, rounds=8
    )
    lines: list[str] = []
    log_run(run, lines.append)
    for line in lines:
        _log.info(line)
    assert check_demo_lines(lines) == (len(run.released), len(run.late))

    for sensor in "AB":
        released = [(seq, ts) for s, seq, ts, _ in run.released if s == sensor]
        written = [(r["seq"], r["ts"]) for r in run.written if r["sensor"] == sensor]
        assert released == sorted(written, key=lambda r: r[1]), sensor  # each once, in order
    late = sorted(run.late)
    assert late == [("C", r["seq"], r["ts"]) for r in run.written if r["sensor"] == "C"]
    assert {sensor for sensor, *_ in run.late} == {"C"}
    assert len(run.written) == 8 * len(OFFSETS_MS)
    marks = [mark for *_, mark in run.released]
    assert marks == sorted(marks)  # Flink's event time only rose
    # Each reading is tagged with the watermark that released it, which covers it.
    stale = [(sensor, ts, mark) for sensor, _, ts, mark in run.released if mark < ts]
    assert stale == [], "released under a watermark below the reading"
