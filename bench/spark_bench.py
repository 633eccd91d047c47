"""Spark benchmark: what a streaming user feels, tidemark source vs Spark's file source.

    python bench/run.py spark                          # 2,000,000 events of 100 bytes
    python bench/run.py spark --events 500000          # a smaller run
    python bench/spark_bench.py --no-write             # run directly, keep RESULTS.md

One run writes ``--events`` JSON events of exactly 100 bytes
(``{"ts": ms, "key": "kN", "value": i, "pad": "..."}``, ``ts`` the wall
clock when the event is written) with ``--keys`` routing keys to a 2-segment
stream of a store server subprocess (``python -m connector.server``, no idle
ticks), and the same events, byte for byte, as JSON-lines files of
``--file-events`` events each. Then, in one local[2] SparkSession, four
long-running queries, each bounded to ``--batch-events`` events per
micro-batch by admission control:

- **read**: the source alone into a noop sink; tidemark with
  ``maxEventsPerTrigger``, the file source with ``maxFilesPerTrigger`` (the
  same events per batch), both with ``ts`` parsed to an event time;
- **window**: a count per key and 1-second event-time window, in append
  mode, into a memory sink whose windows are checked against the events:
  tidemark (``IngestionTime``, ``maxEventTimeLag`` 5 seconds: event times
  trail the ingestion clock by the writer's buffering) through
  :func:`spark_adapter.with_connector_watermark` and then
  :func:`spark_adapter.tumbling_window_count` (per key in Python) or
  :func:`spark_adapter.window_count` (Spark's own aggregation,
  ``tidemark_jvm``); the file source through ``withWatermark("event_time",
  "0 seconds")`` and ``groupBy(window(...), "key").count()``.

Each query runs until it has read everything (``processAllAvailable``).
Figures from Spark's own progress reports: **steady state** is events per
second over the batches after the first (their ``triggerExecution`` times
summed; query start excluded), **start** is from ``start()`` to the first
committed batch (polled). Where the time goes: Spark's ``durationMs`` parts
of the steady-state batches.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _support import (  # noqa: E402
    EVENT_BYTES,
    BenchFailure,
    StoreServerProcess,
    command_block,
    java_version,
    load_average,
    machine_facts,
    markdown_table,
    package_version,
    print_table,
    run_and_record,
    write_store_and_files,
)

__all__ = ["main"]

SECTION = "spark"
HEADING = "Spark adapter: steady-state throughput and query start, tidemark vs Spark's file source"
TARGET_WINDOW_EVENTS_PER_S = 150_000
TARGET_RATIO = 0.7
TARGET_START_GAP_S = 2.0
#: The tidemark windowed count through spark_adapter.window_count (Spark's aggregation).
JVM = "tidemark_jvm"
SCOPE = "bench"
STREAM = "events"
WINDOW = "1 second"
WINDOW_MS = 1_000
LAG = "5 seconds"
# No idle ticks while the benchmark runs: 10^9 ms, about 11.6 days.
NO_IDLE_TICKS_MS = 1_000_000_000
#: Spark's progress parts, in the order a micro-batch runs them.
PARTS = ("latestOffset", "queryPlanning", "walCommit", "getBatch", "addBatch", "commitOffsets")


@dataclass
class Run:
    """One query's figures."""

    system: str
    query: str
    start_s: float
    steady_events: int
    steady_s: float
    batches: int
    parts_s: dict[str, float]
    checked: str
    steady_batches: int = 0
    #: The first batch's ``durationMs`` parts and its ``triggerExecution`` (s).
    first_parts_s: dict[str, float] | None = None
    first_s: float = 0.0

    @property
    def events_per_s(self) -> float:
        return self.steady_events / self.steady_s if self.steady_s else 0.0


# --- data ------------------------------------------------------------------------------


def write_events(args: argparse.Namespace, uri: str, json_dir: str) -> list[int]:
    """Writes the events to the store and to JSON-lines files; returns their event times."""
    return write_store_and_files(
        uri,
        f"{SCOPE}/{STREAM}",
        events=args.events,
        keys=args.keys,
        file_events=args.file_events,
        json_dir=json_dir,
    )


# --- the queries -------------------------------------------------------------------------


def tidemark_read(spark: Any, uri: str, batch_events: int) -> Any:
    return (
        spark.readStream.format("tidemark")
        .option("uri", uri)
        .option("stream", f"{SCOPE}/{STREAM}")
        .option("timeDomain", "IngestionTime")
        .option("deserializer", "json")
        .option("timestampField", "ts")
        .option("maxEventTimeLag", LAG)
        .option("maxEventsPerTrigger", str(batch_events))
        .load()
    )


def file_read(spark: Any, json_dir: str, files_per_batch: int) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    return (
        spark.readStream.schema("ts long, key string, value long, pad string")
        .option("maxFilesPerTrigger", files_per_batch)
        .json(json_dir)
        .withColumn("event_time", F.timestamp_millis("ts"))
    )


def tidemark_window(frame: Any) -> Any:
    import spark_adapter

    events = spark_adapter.with_connector_watermark(frame)
    return spark_adapter.tumbling_window_count(events, WINDOW, key_col="routing_key")


def tidemark_jvm_window(frame: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    import spark_adapter

    events = spark_adapter.with_connector_watermark(frame)
    counts = spark_adapter.window_count(events, WINDOW, key_col="routing_key")
    return counts.withColumn("late", F.lit(False))


def file_window(frame: Any) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    counts = (
        frame.withWatermark("event_time", "0 seconds")
        .groupBy(F.window("event_time", WINDOW), "key")
        .count()
    )
    return counts.select(
        "key", F.col("window.start").alias("window_start"), "count", F.lit(False).alias("late")
    )


def python_floor_start(spark: Any, checkpoint: str) -> tuple[float, dict[str, float]]:
    """The start of a Python streaming source that does nothing (one batch of 2 x 1,000 rows).

    What any Python data source pays to start in this session (the source's
    Python process, Python workers for the tasks), before tidemark's part.
    Returns the start (s) and the first batch's parts (s).
    """
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class NothingReader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:  # noqa: N802
            return {"n": 0}

        def latestOffset(self) -> dict[str, int]:  # noqa: N802
            return {"n": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(0), InputPartition(1)] if end["n"] > start["n"] else []

        def read(self, partition: InputPartition) -> Any:
            return ((i,) for i in range(1_000))

    class NothingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_nothing"

        def schema(self) -> str:
            return "value int"

        def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
            return NothingReader()

    spark.dataSource.register(NothingSource)
    frame = spark.readStream.format("bench_nothing").load()
    began = time.perf_counter()
    running = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        while running.lastProgress is None:
            if running.exception() is not None:
                msg = f"the do-nothing Python source failed: {running.exception()}"
                raise BenchFailure(msg)
            time.sleep(0.01)
        start_s = time.perf_counter() - began
        first = running.recentProgress[0]["durationMs"]
    finally:
        running.stop()
    parts = {part: first.get(part, 0) / 1000 for part in PARTS}
    parts["triggerExecution"] = first["triggerExecution"] / 1000
    return start_s, parts


def run_query(
    spark: Any, frame: Any, system: str, query: str, checkpoint: str, times: list[int]
) -> Run:
    """Runs ``frame`` until everything is read; the figures from Spark's progress reports."""
    name = f"{system}_{query}"
    sink = "memory" if query == "window" else "noop"
    writer = (
        frame.writeStream.format(sink)
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
    )
    if sink == "memory":
        writer = writer.queryName(name)
    began = time.perf_counter()
    running = writer.start()
    try:
        while running.lastProgress is None:
            if running.exception() is not None:
                break
            time.sleep(0.01)
        start_s = time.perf_counter() - began
        running.processAllAvailable()
        progress = list(running.recentProgress)
    finally:
        running.stop()
    if running.exception() is not None:
        msg = f"{name}: the query failed: {running.exception()}"
        raise BenchFailure(msg)
    with_input = [p for p in progress if p["numInputRows"]]
    read = sum(p["numInputRows"] for p in progress)
    if read < len(times):
        msg = f"{name}: read {read:,} rows, {len(times):,} events were written"
        raise BenchFailure(msg)
    steady = with_input[1:]
    # A tidemark batch whose watermark rose carries one watermark row: count events only.
    marks = 0 if system == "file" else 1
    steady_events = sum(p["numInputRows"] - marks for p in steady)
    steady_s = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
    parts = {part: sum(p["durationMs"].get(part, 0) for p in steady) / 1000 for part in PARTS}
    checked = f"{len(with_input)} batches with input"
    if sink == "memory":
        checked = _check_windows(spark, name, progress, times) + f"; {checked}"
    first = progress[0]["durationMs"]
    return Run(
        system,
        query,
        start_s,
        steady_events,
        steady_s,
        len(progress),
        parts,
        checked,
        len(steady),
        {part: first.get(part, 0) / 1000 for part in PARTS},
        first["triggerExecution"] / 1000,
    )


def _check_windows(spark: Any, name: str, progress: list[dict[str, Any]], times: list[int]) -> str:
    """The windows emitted hold exactly the events of the windows the final watermark closed."""
    import datetime

    marks = [p["eventTime"]["watermark"] for p in progress if p["eventTime"].get("watermark")]
    stamp = datetime.datetime.fromisoformat(marks[-1].replace("Z", "+00:00")) if marks else None
    watermark = int(stamp.timestamp() * 1000) if stamp else 0
    closed = sum(1 for t in times if (t // WINDOW_MS + 1) * WINDOW_MS <= watermark)
    row = spark.sql(
        f"select count(*) as n, coalesce(sum(count), 0) as total, "
        f"coalesce(sum(cast(late as int)), 0) as late from {name}"
    ).collect()[0]
    spark.sql(f"drop view if exists {name}")
    if row.late:
        msg = f"{name}: {row.late} late rows; no event should be late"
        raise BenchFailure(msg)
    if row.total != closed:
        msg = f"{name}: the windows count {row.total:,} events; the watermark closed {closed:,}"
        raise BenchFailure(msg)
    return f"{row.n:,} windows hold the {closed:,} events of closed windows"


def run_all(args: argparse.Namespace) -> tuple[list[Run], dict[str, Any]]:
    """Writes the events, runs the queries (read, then window; file first, then tidemark)."""
    import spark_adapter

    facts: dict[str, Any] = {}
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="tidemark-spark-bench-") as scratch,
        StoreServerProcess("--max-watermark-lag-ms", str(NO_IDLE_TICKS_MS)) as server,
    ):
        json_dir = os.path.join(scratch, "json")
        print(f"writing {args.events:,} events ...", flush=True)
        began = time.perf_counter()
        times = write_events(args, server.uri, json_dir)
        facts["write_s"] = time.perf_counter() - began
        spark = spark_adapter.local_session(
            "tidemark-spark-bench", config={"spark.driver.memory": "2g"}
        )
        files_per_batch = args.batch_events // args.file_events
        try:
            plans = [
                ("read", "file"),
                ("read", "tidemark"),
                ("window", "file"),
                ("window", "tidemark"),
                ("window", JVM),
            ]
            for query, system in plans:
                if (query, system) == ("read", "tidemark"):
                    print("  a do-nothing Python source (start only) ...", flush=True)
                    facts["python_floor"] = python_floor_start(
                        spark, os.path.join(scratch, "checkpoint-nothing")
                    )
                print(f"  {system} {query} ...", flush=True)
                if system == "file":
                    frame = file_read(spark, json_dir, files_per_batch)
                    frame = file_window(frame) if query == "window" else frame
                else:
                    frame = tidemark_read(spark, server.uri, args.batch_events)
                    if query == "window":
                        window = tidemark_jvm_window if system == JVM else tidemark_window
                        frame = window(frame)
                checkpoint = os.path.join(scratch, f"checkpoint-{system}-{query}")
                runs.append(run_query(spark, frame, system, query, checkpoint, times))
        finally:
            spark.stop()
    facts["pyspark"] = package_version("pyspark")
    facts["java"] = java_version()
    return runs, facts


# --- report ------------------------------------------------------------------------------


def _find(runs: Sequence[Run], system: str, query: str) -> Run:
    return next(r for r in runs if r.system == system and r.query == query)


def _report(args: argparse.Namespace, runs: list[Run], facts: dict[str, Any]) -> str:
    rows = [["query", "source", "steady-state events/s", "start (s)", "batches", "check"]]
    for run in runs:
        rows.append(
            [
                run.query,
                run.system,
                f"{run.events_per_s:,.0f}",
                f"{run.start_s:.2f}",
                str(run.batches),
                run.checked,
            ]
        )
    print_table(rows)
    tm_read, file_read_ = _find(runs, "tidemark", "read"), _find(runs, "file", "read")
    tm_win, file_win = _find(runs, "tidemark", "window"), _find(runs, "file", "window")
    tm_jvm = _find(runs, JVM, "window")
    jvm_ratio = tm_jvm.events_per_s / file_win.events_per_s
    read_ratio = tm_read.events_per_s / file_read_.events_per_s
    win_ratio = tm_win.events_per_s / file_win.events_per_s
    start_gap = max(tm_read.start_s - file_read_.start_s, tm_win.start_s - file_win.start_s)

    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    targets = [
        f"- windowed count: {tm_win.events_per_s:,.0f} events/s (target >= "
        f"{TARGET_WINDOW_EVENTS_PER_S:,}: {verdict(tm_win.events_per_s >= TARGET_WINDOW_EVENTS_PER_S)}), "  # noqa: E501
        f"{win_ratio:.2f} of the file source's (target >= {TARGET_RATIO}: "
        f"{verdict(win_ratio >= TARGET_RATIO)})",
        f"- windowed count through `window_count` (Spark's aggregation): "
        f"{tm_jvm.events_per_s:,.0f} events/s, {jvm_ratio:.2f} of the file source's",
        f"- read alone: {read_ratio:.2f} of the file source's (target >= {TARGET_RATIO}: "
        f"{verdict(read_ratio >= TARGET_RATIO)})",
        f"- start: at most {start_gap:+.2f} s from the file source's (target within "
        f"{TARGET_START_GAP_S} s: {verdict(start_gap <= TARGET_START_GAP_S)}); the tidemark "
        f"read's start is {tm_read.start_s - facts['python_floor'][0]:+.2f} s from a "
        "do-nothing Python source's (below)",
    ]
    parts = [["query", "source", *PARTS, "total"]]
    for run in runs:
        parts.append(
            [
                run.query,
                run.system,
                *(f"{run.parts_s[p]:.2f}" for p in PARTS),
                f"{run.steady_s:.2f}",
            ]
        )
    starts = [["query", "source", "before the first batch", *PARTS, "start"]]
    for run in runs:
        first = run.first_parts_s or {}
        starts.append(
            [
                run.query,
                run.system,
                f"{run.start_s - run.first_s:.2f}",
                *(f"{first.get(p, 0.0):.2f}" for p in PARTS),
                f"{run.start_s:.2f}",
            ]
        )
    machine = machine_facts("pyspark " + facts["pyspark"], facts["java"])
    lines = [
        f"## {HEADING}",
        "",
        f"Machine: {machine}. "
        f"Load average (1 min) {args.load_before:.2f} before the run, "
        f"{load_average():.2f} after it; the machine is shared.",
        "",
        f"{args.events:,} events of {EVENT_BYTES} bytes, {args.keys} keys, 2 segments; "
        f"{args.batch_events:,} events per micro-batch (files of {args.file_events:,} "
        f"events, {args.batch_events // args.file_events} per trigger); written to the store "
        f"and the files in {facts['write_s']:.1f} s. Steady state: events over the "
        "`triggerExecution` time of the batches after the first; start: `start()` to the "
        "first committed batch.",
        "",
        markdown_table(rows),
        "",
        "Targets on this 2-core machine:",
        "",
        *targets,
        "",
        "Where the steady-state time goes (seconds summed over the batches after the first, "
        "Spark's `durationMs` parts; `addBatch` runs the batch's tasks, `latestOffset` plans "
        "it, `walCommit` and `commitOffsets` write the checkpoint):",
        "",
        markdown_table(parts),
        "",
        *_where(runs),
        "",
        "Where the start goes (seconds: from `start()` to the first batch's trigger, which "
        "starts the query and initializes the source, then the first batch's parts; the "
        "start is polled, so the columns do not add up exactly):",
        "",
        markdown_table(starts),
        "",
        *_python_floor(facts),
        "",
        *command_block(),
    ]
    return "\n".join(lines)


def _where(runs: Sequence[Run]) -> list[str]:
    """Per-batch planning and task time of the read queries, in words."""
    tm, file = _find(runs, "tidemark", "read"), _find(runs, "file", "read")

    def per_batch(run: Run, part: str) -> float:
        return run.parts_s[part] / max(1, run.steady_batches)

    return [
        f"Read alone, per steady-state batch: planning (`latestOffset`) takes tidemark "
        f"{per_batch(tm, 'latestOffset'):.2f} s against the file source's "
        f"{per_batch(file, 'latestOffset'):.2f} s, the tasks (`addBatch`) "
        f"{per_batch(tm, 'addBatch'):.2f} s against {per_batch(file, 'addBatch'):.2f} s. "
        "Under a read limit the source plans a batch by asking the store where each "
        "segment's share stops (`PlanRead`, a lookup in the store's index of event counts); "
        "no event is read back to plan.",
    ]


def _python_floor(facts: dict[str, Any]) -> list[str]:
    """What a Python source that reads nothing pays to start, in words."""
    start_s, parts = facts["python_floor"]
    return [
        f"A Python streaming source that does nothing (2 partitions of 1,000 rows, run just "
        f"before the tidemark read, after the file read) starts in {start_s:.2f} s: "
        f"{start_s - parts['triggerExecution']:.2f} s before its first batch (Spark starts "
        f"the source's Python process) and {parts['addBatch']:.2f} s of tasks (the first "
        "Python query of a session also starts Spark's Python worker daemon). Every Python "
        "data source pays this; the file source, all JVM, does not.",
    ]


# --- entry point -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark_bench",
        description="Steady-state throughput and query start: tidemark vs Spark's file source.",
    )
    parser.add_argument("--events", type=int, default=2_000_000, help="default 2000000")
    parser.add_argument("--keys", type=int, default=10, help="routing keys (default 10)")
    parser.add_argument(
        "--batch-events", type=int, default=100_000, help="events per micro-batch (100000)"
    )
    parser.add_argument(
        "--file-events", type=int, default=25_000, help="events per JSON file (25000)"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark; 0 when it ran (targets met or not), 1 when a check failed."""
    args = _parser().parse_args(argv)
    if min(args.events, args.keys, args.batch_events, args.file_events) <= 0:
        print("--events, --keys, --batch-events and --file-events must be > 0", file=sys.stderr)
        return 2
    if args.batch_events % args.file_events:
        print("--batch-events must be a multiple of --file-events", file=sys.stderr)
        return 2
    return run_and_record(
        SECTION, lambda: _run(args), write=not args.no_write, stopped="server stopped"
    )


def _run(args: argparse.Namespace) -> str:
    args.load_before = load_average()
    runs, facts = run_all(args)
    markdown = _report(args, runs, facts)
    if args.no_write:
        print(markdown)
    return markdown


if __name__ == "__main__":
    sys.exit(main())
