"""Spark in the event-time domain: from a writer's assertion to the query's watermark.

    python -m bench.run event_time_spark              # 45 s of writes
    python -m bench.run event_time_spark --seconds 30 --no-write

A store server subprocess; a writer asserting every ``--interval-ms`` (see
:mod:`_event_time_engines`); one local[2] SparkSession reading the stream
with ``timeDomain`` EventTime and ``timestampField`` ts into ``foreachBatch``.
The connector's watermark of a micro-batch (its ``watermark`` column) is
what Spark takes as its event-time watermark, applied from the next batch
on. Latency of an assertion = the wall time its micro-batch reached
``foreachBatch`` with a connector watermark at or above the assertion,
minus the wall time the assertion was acknowledged.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from bench._event_time_engines import AssertingWriter, EngineLatencies, latencies
from bench._support import StoreServerProcess
from connector import StoreClient

__all__ = ["SparkLatencies", "measure", "options"]


@dataclass(frozen=True)
class SparkLatencies(EngineLatencies):
    """The assertions' latencies, and the median micro-batch's seconds."""

    batch: float = float("nan")


def measure(args: argparse.Namespace) -> SparkLatencies:
    """A Spark query in the event-time domain while a writer asserts; the latencies."""
    import spark_adapter

    reached: list[tuple[float, int]] = []
    durations: list[float] = []
    lock = threading.Lock()

    def collect(frame: Any, _batch_id: int) -> None:
        rows = frame.select("watermark").where("watermark is not null").collect()
        now = time.time()
        marks = [round(r.watermark.timestamp() * 1000) for r in rows]
        if marks:
            with lock:
                reached.append((now, max(marks)))

    with (
        tempfile.TemporaryDirectory(prefix="tidemark-bench-") as scratch,
        StoreServerProcess() as server,
        StoreClient(server.uri) as client,
    ):
        client.create_scope("lat")
        client.create_stream("lat", "asserted", segment_count=2)
        spark = spark_adapter.local_session("tidemark-event-time-bench")
        readings = (
            spark.readStream.format("tidemark")
            .option("uri", server.uri)
            .option("stream", "lat/asserted")
            .option("timeDomain", "EventTime")
            .option("deserializer", "json")
            .option("timestampField", "ts")
            .load()
        )
        query = (
            readings.writeStream.foreachBatch(collect)
            .option("checkpointLocation", os.path.join(scratch, "checkpoint"))
            .start()
        )
        began = time.time()
        writer = AssertingWriter(server.uri, "lat/asserted", args.interval_ms / 1000).start()
        try:
            time.sleep(args.seconds)
        finally:
            writer.stop()
            durations = [
                p["durationMs"]["triggerExecution"] / 1000 for p in list(query.recentProgress)
            ]
            query.stop()
            spark.stop()
    batch = statistics.median(durations) if durations else float("nan")
    found = latencies(writer.acks, reached, began)
    return SparkLatencies(args.interval_ms, args.seconds, found, batch=batch)


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(prog="event_time_spark_bench")
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--interval-ms", type=int, default=100)
    return parser
