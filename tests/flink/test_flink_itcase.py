"""The EventTimeITCase equivalent on PyFlink: sensors A (on time), B (early), C (late).

A real store server (synthetic clock) and a real PyFlink mini-cluster at
parallelism 2: the source's group watermarks are Flink's event time, the
ordering function releases A's and B's readings in event-time order per
sensor, and every C reading reaches the late side output. Each once.

In the event-time domain (parallelism 3 over 2 segments) the sensors assert
their own event time: nothing is late, and once C is idle the watermark
moves on without it.
"""

from __future__ import annotations

import logging

import pytest

from connector import StoreClient, StreamManager
from examples.flink_event_time import log_run, run_sensors_on_flink
from examples.sensors import OFFSETS_MS
from flink_adapter.rows import FLINK_LATEST_MS
from tests.demo_output import check_demo_lines
from tests.flink.conftest import PYTHON_MODES

pytestmark = [pytest.mark.slow, pytest.mark.long]

_log = logging.getLogger("tests.flink")


@pytest.mark.storages("file", "jetstream")
@pytest.mark.parametrize("flink_env", PYTHON_MODES, indirect=True)
def test_on_time_and_early_readings_come_out_in_event_time_order_and_late_ones_aside(
    start_store, clock, flink_env
) -> None:
    """Runs the demo's own code (:func:`examples.flink_event_time.run_sensors_on_flink`).

    In each Python execution mode.
    """
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


@pytest.mark.parametrize("flink_env", PYTHON_MODES, indirect=True)
def test_with_the_sensors_assertions_nothing_is_late_and_the_watermark_moves_on_once_c_idles(
    start_store, clock, flink_env
) -> None:
    """The event-time domain at parallelism 3 over 2 segments: the sensors assert (seed 002).

    While C asserts, Flink's watermark waits for it and nothing is late;
    after round 4 C marks itself idle and each later round's A reading comes
    out without C (the run waits for it before writing the next round); at
    the end the stream is sealed and B's early readings come out. Every
    reading once, in event-time order per sensor, under a watermark that
    covers it.
    """
    server = start_store(max_watermark_lag_ms=300)
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("itcase")
        StreamManager(client).create_stream("itcase", "asserted", 2)

    def let_time_pass() -> None:
        clock.advance(400)
        server.store.advance_idle_segments()

    run = run_sensors_on_flink(
        flink_env,
        server.uri,
        "itcase/asserted",
        clock.now_ms,
        pause=let_time_pass,
        rounds=7,
        parallelism=3,
        domain="EventTime",
        c_idle_after=4,
    )
    lines: list[str] = []
    log_run(run, lines.append)
    for line in lines:
        _log.info(line)
    assert check_demo_lines(lines) == (len(run.released), 0)
    assert run.late == [], "with every sensor asserting, nothing is late"
    for sensor in "ABC":
        released = [(seq, ts) for s, seq, ts, _ in run.released if s == sensor]
        written = [(r["seq"], r["ts"]) for r in run.written if r["sensor"] == sensor]
        assert released == sorted(written, key=lambda r: r[1]), sensor
    c_last = max(r["ts"] for r in run.written if r["sensor"] == "C")
    # While C asserts, the watermark is C's: it released C's readings, and A's (above C's
    # time) waited; once C is idle, A's readings came out without C, before the seal.
    c_marks = [mark for s, _, _, mark in run.released if s == "C"]
    assert c_marks and max(c_marks) <= c_last, "while C asserts, the watermark waits for it"
    after_idle = [mark for s, seq, _, mark in run.released if s == "A" and seq >= 4]
    assert after_idle and all(c_last < mark < FLINK_LATEST_MS for mark in after_idle)
    assert all(mark >= ts for _, _, ts, mark in run.released)
