"""Two Spark queries chained through a Tidemark stream, each with its own watermark (seed 004).

    .venv-spark/bin/python -m examples.spark_chained_pipeline

The sensors (A on time, B early, C slow) assert their own event time as they
write (seed 002). Job 1 reads them in the event-time domain and counts each
sensor's readings per 1 s window; it writes each window's count to a second
stream, stamped with the window's end, with ``assertWatermark``: after each
micro-batch the query asserts the watermark it ran with. Job 2 reads that
stream in the event-time domain and counts job 1's results per 3 s window.
Job 2's watermark is job 1's output watermark, so none of job 1's results is
late in job 2: the failure of a single global watermark that seed 004
describes (a downstream operator dropping an upstream window's output as
late) does not happen. Everything runs on an embedded store, in real time.
Job 1 is a stage (seed 001): before stopping, the example prints what
``tidemarkctl pipeline demo`` shows, its input watermark (its reader
group's event time), its output watermark (what it asserted) and the
event-time latency between them.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager, embedded_store
from connector.cli.pipeline import pipeline
from connector.cli.pipeline_commands import pipeline_text
from connector.clock import SystemClock, utc_text
from examples.sensors import write_asserting_round

__all__ = ["count_job", "recount_job", "sensor_writers"]


def _read(spark: Any, uri: str, stream: str, domain: str, reader_group: str | None = None) -> Any:
    reader = (
        spark.readStream.format("tidemark")
        .option("uri", uri)
        .option("stream", stream)
        .option("timeDomain", domain)
        .option("deserializer", "json")
        .option("timestampField", "ts")
    )
    if domain == "IngestionTime":
        reader = reader.option("maxEventTimeLag", "0 seconds")
    if reader_group is not None:
        reader = reader.option("readerGroup", reader_group)
    return reader.load()


def count_job(
    spark: Any,
    uri: str,
    readings: str,
    counts: str,
    checkpoint: str,
    trigger_ms: int | None = None,
    reader_group: str | None = None,
) -> Any:
    """Job 1: each sensor's readings per 1 s window, to ``counts``, asserting its watermark.

    A window's count is stamped with the window's end (``ts``), so every
    count of a later micro-batch is above the watermark asserted after an
    earlier one. With ``reader_group`` the query publishes its position as
    that group, whose event time ``tidemarkctl pipeline`` shows as the
    stage's input watermark.
    """
    from pyspark.sql import functions as F  # noqa: N812

    from spark_adapter import window_count, with_connector_watermark

    windows = window_count(
        with_connector_watermark(_read(spark, uri, readings, "EventTime", reader_group)),
        "1 second",
    )
    results = windows.select(
        F.col("routing_key").alias("sensor"),
        F.to_json(
            F.struct(
                F.unix_millis("window_end").alias("ts"),
                F.unix_millis("window_start").alias("start"),
                F.col("count"),
            )
        ).alias("body"),
    )
    writer = (
        results.writeStream.outputMode("append")
        .format("tidemark")
        .option("checkpointLocation", checkpoint)
        .options(
            uri=uri,
            stream=counts,
            routingKeyColumn="sensor",
            eventColumn="body",
            assertWatermark="true",
        )
    )
    if trigger_ms is not None:
        writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
    return writer.start()


def recount_job(
    spark: Any,
    uri: str,
    counts: str,
    checkpoint: str,
    sink: Any,
    domain: str = "EventTime",
    trigger_ms: int | None = None,
) -> Any:
    """Job 2: job 1's counts per 3 s window, late ones flagged (``late``), into ``sink``.

    ``sink`` is a ``foreachBatch`` function. In the ``EventTime`` domain its
    watermark is job 1's asserted one; in ``IngestionTime`` (no lag), the
    store's clock, which job 1's results trail.
    """
    from spark_adapter import tumbling_window_count, with_connector_watermark

    windows = tumbling_window_count(
        with_connector_watermark(_read(spark, uri, counts, domain)), "3 seconds"
    )
    writer = (
        windows.writeStream.outputMode("append")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(sink)
    )
    if trigger_ms is not None:
        writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
    return writer.start()


def sensor_writers(client: StoreClient, stream: str) -> dict[str, EventWriter[Any]]:
    """A writer per sensor, each with an id of its own (each asserts its own event time)."""
    return {
        s: EventWriter(client, stream, JsonSerializer(), writer_id=f"sensor-{s}") for s in "ABC"
    }


def main(seconds: float = 20.0) -> None:
    """Runs the sensors and both jobs for ``seconds``; prints job 2's windows and any late ones."""
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    from spark_adapter import local_session

    spark = local_session("tidemark-chained", log_level="FATAL")
    rows: list[dict[str, Any]] = []

    def keep(frame: Any, _batch_id: int) -> None:
        rows.extend(row.asDict() for row in frame.collect())

    with (
        embedded_store(max_watermark_lag_ms=200, polling_period_ms=50) as uri,
        tempfile.TemporaryDirectory() as scratch,
        StoreClient(uri) as client,
    ):
        StreamManager(client).create_scope("demo")
        StreamManager(client).create_stream("demo", "readings", segment_count=2)
        StreamManager(client).create_stream("demo", "counts", segment_count=2)
        one = count_job(
            spark,
            uri,
            "demo/readings",
            "demo/counts",
            os.path.join(scratch, "one"),
            500,
            reader_group="counter",
        )
        two = recount_job(
            spark, uri, "demo/counts", os.path.join(scratch, "two"), keep, trigger_ms=500
        )
        writers = sensor_writers(client, "demo/readings")
        print(f"store at {uri}; job 1 counts per 1 s and asserts its watermark; job 2 per 3 s")
        began, seq = time.monotonic(), 0
        while time.monotonic() - began < seconds:
            write_asserting_round(writers, seq, SystemClock().now_ms)
            seq += 1
            time.sleep(0.2)
        print(pipeline_text(pipeline(client, "demo")))  # what `tidemarkctl pipeline demo` shows
        one.stop()
        two.stop()
    spark.stop()
    for row in rows:
        start = utc_text(int(row["window_start"].timestamp() * 1000))
        flag = "LATE (reported, not dropped)" if row["late"] else "on time"
        print(f"  job 2: sensor {row['routing_key']} window from {start}: {row['count']} ({flag})")
    late = sum(1 for row in rows if row["late"])
    print(f"job 2 closed {len(rows) - late} windows of job 1's results; {late} late")


if __name__ == "__main__":
    main()
