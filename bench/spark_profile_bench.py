"""Where a tidemark read's time goes in Spark: per process, and within a read task's Python.

    python -m bench.run spark_profile                    # 1,000,000 events of 100 bytes
    python -m bench.run spark_profile --no-write         # keep RESULTS.md

Two parts, on the Spark benchmark's events (:mod:`bench.spark_bench`: JSON events
of 100 bytes with ``ts``, 10 keys, a 2-segment stream of a store server
subprocess, and the same events as JSON-lines files):

- **processes**: the Spark benchmark's read query over the tidemark source
  and over Spark's file source, one after the other in one local[2]
  session, each into a noop sink; the CPU seconds every process used
  while it ran (from ``/proc``): the JVM (the engine, the Arrow and row
  conversions, the sink), Spark's Python workers (the read tasks:
  :func:`~connector.reader.source.read_columns` and Arrow), the source's
  driver-side Python process (planning), the store server, and this
  process. Per event: CPU microseconds over the events read.
- **a read task's Python**: the same ranges read in this process, stage by
  stage, best of three, in CPU time: the store reads (gRPC, the client's
  share), frame decoding, event times (the JSON ``ts`` field), Arrow
  batches; then the whole path as a task runs it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import spark_bench
from bench._support import (
    StoreServerProcess,
    cpu_seconds,
    descendants,
    java_version,
    package_version,
    positive,
    write_store_and_files,
)
from bench.figures import Target

__all__ = ["SparkProfileFigures", "measure", "options"]

STREAM = "bench/events"


def _role(pid: int, me: int, server: int) -> str:
    if pid == me:
        return "this process (the driver's Python)"
    if pid == server:
        return "store server"
    try:
        with open(f"/proc/{pid}/cmdline", encoding="utf-8", errors="replace") as file:
            command = file.read().replace("\0", " ")
    except OSError:
        return "other"
    if "java" in command.split(" ", 1)[0]:
        return "JVM"
    if "python_streaming_source_runner" in command:
        return "source process (planning)"
    if "pyspark.daemon" in command or "pyspark.worker" in command:
        return "Python workers (read tasks)"
    return "other (unnamed: exited or a helper)"


def _cpu_by_role(me: int, server: int) -> dict[int, tuple[str, float]]:
    pids = {me, *descendants(me), server}
    return {pid: (_role(pid, me, server), cpu_seconds(pid) or 0.0) for pid in pids}


def processes(spark: Any, uri: str, json_dir: str, scratch: str, times: list[int]) -> list[dict]:
    """The CPU each process used while each read query ran."""
    me = os.getpid()
    server = [p for p in descendants(me) if "connector.server" in _command(p)][0]
    found = []
    for system in ("tidemark", "file"):
        if system == "tidemark":
            frame = spark_bench.tidemark_read(spark, uri, 100_000)
        else:
            frame = spark_bench.file_read(spark, json_dir, 4)
        before = _cpu_by_role(me, server)
        began = time.perf_counter()
        run = spark_bench.run_query(
            spark, frame, system, "read", os.path.join(scratch, f"ck-{system}"), times
        )
        wall = time.perf_counter() - began
        after = _cpu_by_role(me, server)
        roles: dict[str, float] = {}
        for pid, (role, cpu) in after.items():
            roles[role] = roles.get(role, 0.0) + cpu - before.get(pid, (role, 0.0))[1]
        found.append({"system": system, "wall": wall, "steady": run.events_per_s, "roles": roles})
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", encoding="utf-8", errors="replace") as file:
            return file.read().replace("\0", " ")
    except OSError:
        return ""


def _best_cpu(work: Callable[[], Any], times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        began = time.process_time()
        work()
        best = min(best, time.process_time() - began)
    return best


def task_stages(uri: str) -> dict[str, float]:
    """CPU seconds of each stage of the read tasks' Python, the ranges read in this process."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from connector import StoreClient
    from connector.framing import decode_columns
    from connector.reader.source import EventTimes, SegmentRange, columns_of, read_range
    from spark_adapter.options import for_stream, read_spec
    from spark_adapter.reading import arrow_batches
    from spark_adapter.schema import tidemark_schema

    options = {
        "uri": uri,
        "stream": STREAM,
        "timeDomain": "IngestionTime",
        "deserializer": "json",
        "timestampField": "ts",
        "maxEventTimeLag": "5 seconds",
    }
    spec = for_stream(read_spec(options))
    schema = to_arrow_schema(tidemark_schema("json"), timezone="UTC")
    times = EventTimes(spec.time, spec.deserializer)
    with StoreClient(uri) as client:
        segments = [f"{STREAM}/{n}" for n in (0, 1)]
        ranges = [SegmentRange(s, 0, client.segment_info(s).write_offset) for s in segments]
        reads = [(r.segment, res) for r in ranges for res in read_range(client, r)]
        frames = [decode_columns(res.data, res.offset) for _, res in reads]
        columns = [columns_of(s, res.data, res.offset, times) for s, res in reads]

        def whole() -> None:
            for segment_range in ranges:
                parts = (
                    columns_of(segment_range.segment, res.data, res.offset, times)
                    for res in read_range(client, segment_range)
                )
                for _ in arrow_batches(parts, 0, schema):
                    pass

        return {
            "store reads (client's share)": _best_cpu(
                lambda: [list(read_range(client, r)) for r in ranges]
            ),
            "frame decoding": _best_cpu(
                lambda: [decode_columns(r.data, r.offset) for _, r in reads]
            ),
            "event times (JSON ts)": _best_cpu(
                lambda: [times.of(s, f) for (s, _), f in zip(reads, frames, strict=True)]
            ),
            "Arrow batches": _best_cpu(lambda: list(arrow_batches(iter(columns), 0, schema))),
            "the whole task path": _best_cpu(whole),
        }


@dataclass(frozen=True)
class SparkProfileFigures:
    """CPU seconds by process of each read query (tidemark, then file), and by task stage."""

    events: int
    stages: dict[str, float]
    #: Per query, tidemark then file: system, wall, steady (events/s), roles (CPU s by process).
    found: list[dict]
    software: tuple[str, ...]

    def _per_event(self, seconds: float) -> float:
        return seconds / self.events * 1e6

    @property
    def processes(self) -> list[tuple[str, float, float, float, float]]:
        """(process, tidemark CPU s, file CPU s, tidemark µs/event, file µs/event); last ``all``."""
        rows = []
        roles = sorted({role for run in self.found for role in run["roles"]})
        cpus = [(role, [r["roles"].get(role, 0.0) for r in self.found]) for role in roles]
        cpus.append(("all", [sum(r["roles"].values()) for r in self.found]))
        for role, (t, f) in cpus:
            rows.append((role, t, f, self._per_event(t), self._per_event(f)))
        return rows

    @property
    def stage_rows(self) -> list[tuple[str, float, float]]:
        """(stage, CPU s, µs/event) of a read task's Python."""
        return [(name, s, self._per_event(s)) for name, s in self.stages.items()]

    @property
    def steady(self) -> list[tuple[str, float]]:
        """(source, steady-state events/s) of each read query."""
        return [(r["system"], r["steady"]) for r in self.found]

    @property
    def targets(self) -> dict[str, Target]:
        """None: where the time goes is reported, not judged."""
        return {}


def measure(args: argparse.Namespace) -> SparkProfileFigures:
    """A read task's stages in this process, then both read queries in Spark."""
    import spark_adapter

    with (
        tempfile.TemporaryDirectory(prefix="tidemark-spark-profile-") as scratch,
        StoreServerProcess(*spark_bench.STORE_ARGS) as server,
    ):
        json_dir = os.path.join(scratch, "json")
        print(f"writing {args.events:,} events ...", flush=True)
        times = write_store_and_files(
            server.uri,
            STREAM,
            events=args.events,
            keys=10,
            file_events=25_000,
            json_dir=json_dir,
            closing_window_ms=spark_bench.WINDOW_MS,  # as the Spark benchmark's read
        )
        print("a read task's Python, stage by stage ...", flush=True)
        stages = task_stages(server.uri)
        spark = spark_adapter.local_session(
            "tidemark-spark-profile", config={"spark.driver.memory": "2g"}
        )
        try:
            # Spark's Python workers start with the session's first Python query: not measured.
            spark_bench.python_floor_start(spark, os.path.join(scratch, "checkpoint-nothing"))
            print("the read queries ...", flush=True)
            found = processes(spark, server.uri, json_dir, scratch, times)
        finally:
            spark.stop()
    software = (f"pyspark {package_version('pyspark')}", java_version())
    return SparkProfileFigures(args.events, stages, found, software)


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=positive, default=1_000_000, help="default 1000000")
    return parser
