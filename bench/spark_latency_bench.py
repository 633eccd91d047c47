"""Spark latency benchmark: from a write to the event's ordered output, with a 5 s lag.

    python -m bench.run spark_latency                  # 40 s of writes
    python -m bench.run spark_latency --seconds 20 --no-write

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
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from bench._support import StoreServerProcess, percentile
from bench.figures import Target
from connector import EventWriter, JsonSerializer, StoreClient

__all__ = ["SparkLatencyFigures", "measure", "options"]

WARM_UP_S = 10.0
KEYS = ("A", "B", "C")


@dataclass(frozen=True)
class SparkLatencyFigures:
    """Each on-time reading's latency (s) after the warm-up, the batches' seconds, the settings."""

    interval_ms: int
    seconds: float
    lag_ms: int
    latencies: list[float]
    durations: list[float]
    keys: int = len(KEYS)
    warm_up_s: float = WARM_UP_S
    software: tuple[str, ...] = ()

    @property
    def readings(self) -> int:
        """On-time readings out after the warm-up."""
        return len(self.latencies)

    @property
    def median(self) -> float:
        """The median latency, s."""
        return statistics.median(self.latencies)

    @property
    def p90(self) -> float:
        """The 90th percentile, s."""
        return percentile(self.latencies, 90)

    @property
    def highest(self) -> float:
        """The longest latency, s."""
        return max(self.latencies)

    @property
    def batch(self) -> float:
        """The median micro-batch's seconds (NaN without progress reports)."""
        return statistics.median(self.durations) if self.durations else float("nan")

    @property
    def lag_s(self) -> float:
        """The query's ``maxEventTimeLag``, s."""
        return self.lag_ms / 1000

    @property
    def rest(self) -> float:
        """The median latency beyond the lag, s."""
        return self.median - self.lag_s

    @property
    def rest_batches(self) -> float:
        """:attr:`rest` in median micro-batches."""
        return self.rest / self.batch

    @property
    def targets(self) -> dict[str, Target]:
        """None: the figure is reported, not judged."""
        return {}


def measure(args: argparse.Namespace) -> SparkLatencyFigures:
    """The README's query on a steady writer; each on-time reading's latency."""
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
    print(f"{len(batch_starts)} micro-batches reached foreachBatch")
    return SparkLatencyFigures(args.interval_ms, args.seconds, args.lag_ms, latencies, durations)


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(prog="spark_latency_bench", description=__doc__)
    parser.add_argument("--seconds", type=float, default=40.0, help="writing time (40)")
    parser.add_argument("--interval-ms", type=int, default=100, help="between writes (100)")
    parser.add_argument("--lag-ms", type=int, default=5_000, help="maxEventTimeLag (5000)")
    return parser
