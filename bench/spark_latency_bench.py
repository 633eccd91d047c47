"""Spark latency benchmark: from a write to the event's ordered output, with a 5 s lag.

    python bench/run.py spark_latency                  # 40 s of writes
    python bench/spark_latency_bench.py --seconds 20 --no-write

A store server subprocess (``python -m connector.server``, its default idle
ticks) and one local[2] SparkSession running the README's query:
``timeDomain`` IngestionTime, ``maxEventTimeLag`` ``--lag-ms``,
``timestampField`` ts, then :func:`spark_adapter.with_connector_watermark`
and :func:`spark_adapter.order_by_event_time` into ``foreachBatch``. A writer
thread writes one reading per key every ``--interval-ms`` to a 2-segment
stream, ``ts`` the wall clock at the write. Each on-time reading's latency
is the wall clock when its micro-batch reaches ``foreachBatch`` minus its
``ts``; the first 10 s are warm-up. The report splits the latency into the
lag, the micro-batches Spark needs (the watermark of a batch is applied in
the next one) and the rest.
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

from _support import (  # noqa: E402
    StoreServerProcess,
    command_block,
    load_average,
    machine_facts,
    markdown_table,
    percentile,
    run_and_record,
)

from connector import EventWriter, JsonSerializer, StoreClient  # noqa: E402

__all__ = ["main"]

SECTION = "spark_latency"
HEADING = "Spark adapter: latency from a write to ordered output"
WARM_UP_S = 10.0
KEYS = ("A", "B", "C")


def _measure(args: argparse.Namespace) -> dict[str, Any]:

    import spark_adapter

    latencies: list[float] = []
    batch_starts: list[float] = []
    lock = threading.Lock()
    began = time.time()

    def collect(frame: Any, batch_id: int) -> None:
        rows = frame.select("event_time", "late").collect()
        now = time.time()
        with lock:
            batch_starts.append(now)
            if now - began < WARM_UP_S:
                return
            latencies.extend(now - r.event_time.timestamp() for r in rows if not r.late)

    with (
        tempfile.TemporaryDirectory(prefix="tidemark-latency-") as scratch,
        StoreServerProcess() as server,
        StoreClient(server.uri) as client,
    ):
        client.create_scope("lat")
        client.create_stream("lat", "readings", segment_count=2)
        spark = spark_adapter.local_session("tidemark-latency-bench")
        readings = (
            spark.readStream.format("tidemark")
            .option("uri", server.uri)
            .option("stream", "lat/readings")
            .option("timeDomain", "IngestionTime")
            .option("maxEventTimeLag", f"{args.lag_ms} milliseconds")
            .option("deserializer", "json")
            .option("timestampField", "ts")
            .load()
        )
        ordered = spark_adapter.order_by_event_time(
            spark_adapter.with_connector_watermark(readings)
        )
        query = (
            ordered.writeStream.foreachBatch(collect)
            .option("checkpointLocation", os.path.join(scratch, "checkpoint"))
            .start()
        )
        stop = threading.Event()

        def write() -> None:
            with EventWriter(client, "lat/readings", JsonSerializer()) as writer:
                while not stop.is_set():
                    now = int(time.time() * 1000)
                    for key in KEYS:
                        writer.write_event({"sensor": key, "ts": now}, routing_key=key)
                    writer.flush()
                    stop.wait(args.interval_ms / 1000)

        writer_thread = threading.Thread(target=write, daemon=True)
        writer_thread.start()
        try:
            time.sleep(args.seconds)
        finally:
            stop.set()
            writer_thread.join(timeout=30)
            progress = list(query.recentProgress)
            query.stop()
            spark.stop()
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    return {"latencies": latencies, "durations": durations, "batches": len(batch_starts)}


def _report(args: argparse.Namespace, figures: dict[str, Any]) -> str:
    latencies = figures["latencies"]
    durations = figures["durations"]
    if not latencies:
        return f"## {HEADING}\n\nNo reading came out after the warm-up.\n"
    median = statistics.median(latencies)
    batch = statistics.median(durations) if durations else float("nan")
    lag_s = args.lag_ms / 1000
    rows = [
        ["readings out", "median (s)", "p90 (s)", "max (s)", "batch median (s)"],
        [
            f"{len(latencies):,}",
            f"{median:.2f}",
            f"{percentile(latencies, 90):.2f}",
            f"{max(latencies):.2f}",
            f"{batch:.2f}",
        ],
    ]
    lines = [
        f"## {HEADING}",
        "",
        f"Machine: {machine_facts()}. Load average (1 min) {args.load_before:.2f} before, "
        f"{load_average():.2f} after; the machine is shared.",
        "",
        f"{len(KEYS)} keys, one reading each every {args.interval_ms} ms for {args.seconds} s, "
        f"2 segments, lag {lag_s:g} s; latency = when the reading's micro-batch reaches "
        f"`foreachBatch` minus its `ts` (the write), on-time readings after {WARM_UP_S:g} s.",
        "",
        markdown_table(rows),
        "",
        f"Of the median {median:.2f} s: the lag, {lag_s:g} s, is the promise the query asked "
        "for (no reading may come out before every reading up to its time has arrived); the "
        f"rest, {median - lag_s:.2f} s, is about {(median - lag_s) / batch:.1f} micro-batches "
        f"of {batch:.2f} s: the batch that reads the watermark passing the reading, and the "
        "next one, where Spark applies it (Spark takes a batch's watermark for the batch after "
        "it) and the ordering releases the reading.",
        "",
        *command_block(),
    ]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spark_latency_bench", description=__doc__)
    parser.add_argument("--seconds", type=float, default=40.0, help="writing time (40)")
    parser.add_argument("--interval-ms", type=int, default=100, help="between writes (100)")
    parser.add_argument("--lag-ms", type=int, default=5_000, help="maxEventTimeLag (5000)")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the measurement; 0 when it ran."""
    args = _parser().parse_args(argv)
    args.load_before = load_average()
    return run_and_record(SECTION, lambda: _report(args, _measure(args)), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
