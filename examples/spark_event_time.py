"""The sensor demo on Spark: A on time, B early, C late, ordered by Spark's event time.

    .venv-spark/bin/python -m examples.spark_event_time      (what `make demo` runs)

A store is embedded in this process; Spark (local mode) reads the sensors'
stream with ``spark.readStream.format("tidemark")`` in the ingestion-time
domain, takes each reading's event time from its ``ts`` field, and orders each
sensor's readings with :func:`spark_adapter.order_by_event_time` on the
connector's group watermark. A's and B's readings come out in event-time
order once the watermark passes them; C's are flagged late.
"""

from __future__ import annotations

import os
import tempfile
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
from examples.sensors import LAG_MS, late_line, reading_line, watermark_line, write_round

__all__ = ["SparkSensorRun", "await_batches", "run_sensors_on_spark", "sensor_query"]


def sensor_query(
    spark: Any, uri: str, stream: str, checkpoint: str, table: str, domain: str = "IngestionTime"
) -> Any:
    """Starts the ordering query over ``stream`` into the memory table ``table``.

    ``domain``: ``IngestionTime`` (the store's clock less ``LAG_MS``) or
    ``EventTime`` (the event time the sensors assert, no lag).
    """
    from pyspark.sql import functions as F  # noqa: N812

    from spark_adapter import order_by_event_time, with_connector_watermark

    source = (
        spark.readStream.format("tidemark")
        .option("uri", uri)
        .option("stream", stream)
        .option("timeDomain", domain)
        .option("deserializer", "json")
        .option("timestampField", "ts")
    )
    if domain == "IngestionTime":
        source = source.option("maxEventTimeLag", f"{LAG_MS} milliseconds")
    readings = source.load()
    ordered = order_by_event_time(with_connector_watermark(readings), key_col="routing_key")
    return (
        ordered.select(
            F.col("routing_key").alias("sensor"),
            F.get_json_object("event", "$.seq").cast("int").alias("seq"),
            F.unix_millis("event_time").alias("ts"),
            "late",
        )
        .writeStream.format("memory")
        .queryName(table)
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="100 milliseconds")
        .start()
    )


@dataclass
class SparkSensorRun:
    """What the Spark query produced."""

    written: list[dict[str, Any]] = field(default_factory=list)
    released: list[tuple[str, int, int]] = field(
        default_factory=list
    )  # (sensor, seq, ts) in output order
    late: list[tuple[str, int, int]] = field(default_factory=list)
    watermarks: list[int] = field(default_factory=list)


def run_sensors_on_spark(
    spark: Any,
    uri: str,
    stream: str,
    now_ms: Callable[[], int],
    pause: Callable[[], None],
    settle: Callable[[Any], None],
    rounds: int,
    checkpoint: str,
    table: str = "sensor_output",
) -> SparkSensorRun:
    """Writes ``rounds`` rounds of readings while the Spark query orders them.

    ``pause`` lets time pass between rounds, ``settle(query)`` waits until the
    query has processed what the store has. At the end time keeps passing
    until every reading is either released or flagged late.
    """
    run = SparkSensorRun()
    query = sensor_query(spark, uri, stream, checkpoint, table)
    try:
        settle(query)
        with StoreClient(uri) as client, EventWriter(client, stream, JsonSerializer()) as writer:
            for seq in range(rounds):
                run.written.extend(write_round(writer, seq, now_ms))
                pause()
                settle(query)
        for _ in range(200):
            rows = spark.sql(f"select sensor, seq, ts, late from {table}").collect()
            if len(rows) >= len(run.written):
                break
            pause()
            settle(query)
        run.released = [(r.sensor, r.seq, r.ts) for r in rows if not r.late]
        run.late = [(r.sensor, r.seq, r.ts) for r in rows if r.late]
        marks = [p["eventTime"].get("watermark") for p in query.recentProgress if "eventTime" in p]
        # Spark reports 1970-01-01 (0) until a batch carried a watermark: not an advance.
        run.watermarks = sorted({ms for ms in (_epoch_ms(m) for m in marks if m) if ms > 0})
    finally:
        query.stop()
    return run


def await_batches(query: Any, count: int = 2, timeout_s: float = 60.0) -> None:
    """Waits until ``query`` completed ``count`` more micro-batches.

    Real time: the offsets keep moving.

    ``processAllAvailable`` never returns on a live store, whose idle ticks
    move the watermark, and so the offsets, every polling period.
    """

    def last_batch() -> int:
        progress = query.lastProgress
        return -1 if progress is None else progress["batchId"]

    target = last_batch() + count
    deadline = time.monotonic() + timeout_s
    while last_batch() < target:
        if time.monotonic() > deadline or not query.isActive:
            msg = f"query made no progress in {timeout_s} s: {query.exception()!r}"
            raise RuntimeError(msg)
        time.sleep(0.05)


def _epoch_ms(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def main(rounds: int = 8) -> None:
    """Runs the demo on an embedded store and local Spark, printing the ordered output."""
    # Spark's own pandas serializer warns on every empty state batch; the workers inherit this.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    from spark_adapter import local_session

    # FATAL: stopping a live query aborts its batch in flight.
    spark = local_session("tidemark-demo", log_level="FATAL")
    with (
        embedded_store(max_watermark_lag_ms=200, polling_period_ms=50) as uri,
        tempfile.TemporaryDirectory() as scratch,
    ):
        with StoreClient(uri) as client:
            StreamManager(client).create_scope("demo")
            StreamManager(client).create_stream("demo", "sensors", segment_count=2)
        print(f"store at {uri}; Spark {spark.version}; lag {LAG_MS} ms; A on time, B early, C late")
        run = run_sensors_on_spark(
            spark,
            uri,
            "demo/sensors",
            SystemClock().now_ms,
            pause=lambda: time.sleep(0.3),
            settle=await_batches,
            rounds=rounds,
            checkpoint=os.path.join(scratch, "checkpoint"),
        )
        for sensor in "AB":
            print(f"sensor {sensor}, in event-time order:")
            for _, seq, ts in (r for r in run.released if r[0] == sensor):
                print(reading_line(ts, sensor, seq))
        for sensor, seq, ts in run.late:
            print(late_line(ts, sensor, seq))
        for mark in run.watermarks:
            print(watermark_line(mark))
        print(
            f"released {len(run.released)} readings in event-time order per sensor, "
            f"{len(run.late)} late, {len(run.watermarks)} watermark advances"
        )
    spark.stop()


if __name__ == "__main__":
    main()
