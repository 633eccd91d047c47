"""Spark in the event-time domain: from a writer's assertion to the query's watermark.

    python bench/run.py event_time_spark              # 45 s of writes
    python bench/event_time_spark_bench.py --seconds 30 --no-write

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
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyspark  # noqa: E402,F401  (skipped where Spark is not installed)
from _event_time_engines import AssertingWriter, latency_rows, table  # noqa: E402
from _support import (  # noqa: E402
    StoreServerProcess,
    command_block,
    load_average,
    machine_facts,
    print_table,
    run_and_record,
)

from connector import StoreClient  # noqa: E402

__all__ = ["main"]

SECTION = "event_time_spark"
HEADING = "Spark in the event-time domain: from an assertion to the query's watermark"


def _run(args: argparse.Namespace) -> str:
    import spark_adapter

    load_before = load_average()
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
    rows, latencies = latency_rows(writer.acks, reached, began)
    print_table(rows)
    batch = statistics.median(durations) if durations else float("nan")
    return "\n".join(
        [
            f"## {HEADING}",
            "",
            f"Measured {time.strftime('%Y-%m-%d')} on {machine_facts()}. Load average (1 min) "
            f"{load_before:.2f} before, {load_average():.2f} after: other developers' test runs "
            "share the 2 cores.",
            "",
            f"A writer appends a reading to each of 2 segments and asserts its time every "
            f"{args.interval_ms} ms for {args.seconds} s; one Spark query (local[2], default "
            "trigger) reads the stream in the event-time domain into `foreachBatch`. Latency = "
            "when the first micro-batch whose connector watermark is at or above an assertion "
            "reached `foreachBatch`, minus the assertion's acknowledgement; after a "
            "15 s warm-up.",
            "",
            table(rows),
            "",
            f"Micro-batches took {batch:.2f} s (median): an assertion waits for the batch under "
            "way to end, then is read by the next one. Spark applies a batch's watermark from "
            "the batch after it, one more batch before a window closes on it.",
            "",
            *command_block(),
        ]
    ) + ("\n" if latencies else "\nNo assertion was reached after the warm-up.\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark and records its figures."""
    parser = argparse.ArgumentParser(prog="event_time_spark_bench")
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    return run_and_record(SECTION, lambda: _run(args), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
