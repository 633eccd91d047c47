"""The sensor demo on Flink: A on time, B early, C late, ordered by Flink's event time.

    .venv-flink/bin/python -m examples.flink_event_time      (what `make demo-flink` runs)

A store is embedded in this process; a PyFlink job (a local mini-cluster)
reads the sensors' stream with :class:`flink_adapter.FlinkTidemarkReader` in
the ingestion-time domain, takes each reading's event time from its ``ts``
field, and orders each sensor's readings with
:class:`flink_adapter.EventTimeOrderingFunction` on the connector's group
watermark, which is Flink's event time. A's and B's readings come out in
event-time order once the watermark passes them, each after the watermark
that released it; C's reach the late side output, reported, never dropped.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connector import (
    EventWriter,
    JsonSerializer,
    StoreClient,
    StreamManager,
    SystemClock,
    embedded_store,
)
from examples.job_output import Collected
from examples.sensors import (
    LAG_MS,
    OFFSETS_MS,
    join_asserting,
    late_line,
    reading_line,
    watermark_line,
    write_asserting_round,
    write_round,
)

__all__ = ["FlinkSensorRun", "log_run", "run_sensors_on_flink", "sensor_job"]

_log = logging.getLogger("examples.flink_event_time")


@dataclass
class FlinkSensorRun:
    """What the Flink job produced."""

    written: list[dict[str, Any]] = field(default_factory=list)
    #: (sensor, seq, ts, Flink's watermark when it came out), in output order.
    released: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: (sensor, seq, ts), in output order.
    late: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def watermarks(self) -> list[int]:
        """The distinct watermarks in force as readings were released, ascending."""
        return sorted({mark for *_, mark in self.released})

    def settled(self) -> bool:
        """Whether every reading written is out: released (on time, early) or late."""
        out = {(s, q) for s, q, *_ in self.released} | {(s, q) for s, q, _ in self.late}
        return {(r["sensor"], r["seq"]) for r in self.written} <= out


def sensor_job(
    env: Any, uri: str, stream: str, parallelism: int = 2, domain: str = "IngestionTime"
) -> Any:
    """The ordering job over ``stream``: JSON rows ``{"kind": "released"|"late", ...}``.

    ``domain``: ``IngestionTime`` (the group watermark less ``LAG_MS``) or
    ``EventTime`` (the event time the sensors assert, seed 002).

    A released row carries ``wm``, the watermark that released it: the one in
    force when its event-time timer fired, which covers its timestamp. (A
    function after the ordering would see the watermark before that one:
    Flink forwards a watermark only after the rows its timers emitted.)
    """
    from pyflink.common import Types

    from flink_adapter import (
        LATE_EVENTS,
        EventTimeOrderingFunction,
        FlinkTidemarkReader,
        TimeDomain,
    )

    class Releasing(EventTimeOrderingFunction):
        """The ordering function, tagging each reading with the watermark that released it."""

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            watermark = ctx.timer_service().current_watermark()
            for value in super().on_timer(timestamp, ctx):
                yield json.dumps({"kind": "released", "event": value[1], "wm": watermark})

    builder = (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream(stream, start="earliest")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.parse(domain))
        .with_timestamp_assigner("ts")
        .with_parallelism(parallelism)
    )
    if TimeDomain.parse(domain) is TimeDomain.INGESTION_TIME:
        builder = builder.with_max_event_time_lag(LAG_MS)
    reader = builder.build()
    released = (
        reader.create_stream(env)
        .key_by(lambda row: json.loads(row[1])["sensor"], key_type=Types.STRING())
        .process(Releasing(), output_type=Types.STRING())
    )
    late = released.get_side_output(LATE_EVENTS).map(
        lambda row: json.dumps({"kind": "late", "event": row[1]}), output_type=Types.STRING()
    )
    return released.union(late)


def run_sensors_on_flink(
    env: Any,
    uri: str,
    stream: str,
    now_ms: Callable[[], int],
    pause: Callable[[], None],
    rounds: int,
    parallelism: int = 2,
    timeout_s: float = 120.0,
    domain: str = "IngestionTime",
    c_idle_after: int | None = None,
) -> FlinkSensorRun:
    """Writes ``rounds`` rounds of readings while the Flink job orders them.

    A warm-up reading (sensor ``W``, not in the result) goes first, and the
    rounds only once it is out, so the job runs and its event time is
    established; each next round once the previous one's C reading is out.
    ``pause`` lets time pass between rounds, and afterwards
    until every reading is either released or reported late (at most
    ``timeout_s`` seconds of real time for each wait). The job is cancelled on return.

    In the ``EventTime`` domain each sensor writes with a writer of its own
    that asserts after each reading; with ``c_idle_after``, C marks itself
    idle after that many rounds and writes no more (the rounds after wait
    for A's reading instead). At the end the stream is sealed, so B's early
    readings come out too.

    Raises:
        TimeoutError: the job produced too little within ``timeout_s``.
    """
    run = FlinkSensorRun()
    asserting = domain == "EventTime"

    def out(reading: tuple[str, int]) -> bool:
        _gather(run, output.rows)
        return reading in {(s, q) for s, q, *_ in run.released} | {(s, q) for s, q, _ in run.late}

    with sensor_job(env, uri, stream, parallelism, domain).execute_and_collect() as results:
        output = Collected(results)
        with StoreClient(uri) as client:
            writers = {
                sensor: EventWriter(client, stream, JsonSerializer(), writer_id=f"sensor-{sensor}")
                for sensor in ("W", *OFFSETS_MS)
            }
            # The warm-up reading shows the job reads. Asserting, its writer's time stays
            # below every sensor's first reading (readers never take a watermark back), and
            # every sensor holds the watermark before the warm-up writer lets go of it.
            behind = min(OFFSETS_MS.values()) - 1 if asserting else -2 * LAG_MS
            warm_up = {"sensor": "W", "seq": -1, "ts": now_ms() + behind}
            writers["W"].write_event(warm_up, routing_key="W")
            if asserting:
                writers["W"].note_time(warm_up["ts"])
            writers["W"].flush()
            _await(output, lambda: bool(output.rows), "the warm-up reading", pause, timeout_s)
            if asserting:
                join_asserting(writers, now_ms, OFFSETS_MS)
            writers["W"].close()  # idle: the warm-up writer holds nobody back
            for seq in range(rounds):
                c_writes = c_idle_after is None or seq < c_idle_after
                sensors = [s for s in OFFSETS_MS if c_writes or s != "C"]
                if asserting:
                    round_readings = write_asserting_round(writers, seq, now_ms, sensors)
                else:
                    round_readings = write_round(writers["A"], seq, now_ms)
                run.written.extend(round_readings)
                pause()
                # One round at a time: the late sensor's reading is judged against the
                # watermark in force when it is read, so the job must not fall rounds behind.
                awaited = ("C" if c_writes else "A", seq)
                _await(output, lambda r=awaited: out(r), f"round {seq}", pause, timeout_s)
                if c_idle_after is not None and seq + 1 == c_idle_after:
                    writers["C"].mark_idle()
            for writer in writers.values():
                writer.close()
            if asserting:  # the end: every reading still held is due
                client.seal_stream(*stream.split("/"))

        def settled() -> bool:
            _gather(run, output.rows)
            return run.settled()

        _await(output, settled, "every reading released or late", pause, timeout_s)
    return run


def _await(
    output: Collected,
    condition: Callable[[], bool],
    what: str,
    pause: Callable[[], None],
    timeout_s: float,
) -> None:
    """Lets time pass until ``condition()`` holds, polling the job's output as it grows."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            msg = f"the job gave no {what} within {timeout_s} s (it gave {len(output.rows)} rows)"
            raise TimeoutError(msg)
        pause()
        with output.condition:
            output.condition.wait(timeout=0.2)  # woken early by a new row


def _gather(run: FlinkSensorRun, rows: list[dict[str, Any]]) -> None:
    run.released, run.late = [], []
    for row in list(rows):
        reading = json.loads(row["event"])
        if reading["sensor"] not in OFFSETS_MS:  # the warm-up reading
            continue
        key = (reading["sensor"], reading["seq"], reading["ts"])
        if row["kind"] == "released":
            run.released.append((*key, row["wm"]))
        else:
            run.late.append(key)


def log_run(run: FlinkSensorRun, log: Callable[[str], None]) -> None:
    """Reports ``run`` in output order: each watermark, then the readings it released.

    Late readings are reported, never dropped (the late side output).
    Times are epoch milliseconds with the UTC time beside them.
    """
    for sensor, seq, ts in run.late:
        log(late_line(ts, sensor, seq))
    last_mark = None
    for sensor, seq, ts, mark in run.released:
        if mark != last_mark:
            log(watermark_line(mark))
            last_mark = mark
        log(reading_line(ts, sensor, seq))


def main(rounds: int = 8) -> None:
    """Runs the demo on an embedded store and a local Flink mini-cluster, printing the output."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    configuration = Configuration()
    configuration.set_string("parallelism.default", "2")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    with embedded_store(max_watermark_lag_ms=200, polling_period_ms=50) as uri:
        with StoreClient(uri) as client:
            StreamManager(client).create_scope("demo")
            StreamManager(client).create_stream("demo", "sensors", segment_count=2)
        print(f"store at {uri}; Flink mini-cluster; lag {LAG_MS} ms; A on time, B early, C late")
        run = run_sensors_on_flink(
            env,
            uri,
            "demo/sensors",
            SystemClock().now_ms,
            pause=lambda: time.sleep(0.3),
            rounds=rounds,
        )
    log_run(run, print)
    print(
        f"released {len(run.released)} readings in event-time order per sensor, "
        f"{len(run.late)} late, {len(run.watermarks)} watermark advances"
    )


if __name__ == "__main__":
    main()
