"""Spark benchmark: what a streaming user feels, tidemark source vs Spark's file source.

    python bench/run.py spark                          # 1,000,000 events, 3 pairs
    python bench/run.py spark --events 500000 --pairs 5
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

The queries run in ``--pairs`` interleaved pairs (file read, tidemark read,
file window, tidemark window, ``window_count``; then again), so that a
burst of load from others on a shared machine falls on both sides of a
pair; each pair gives a ratio, and the verdicts use the median ratio of the
pairs. Each query runs until it has read everything (``processAllAvailable``).
Figures from Spark's own progress reports: **steady state** is events per
second over the batches after the first (their ``triggerExecution`` times
summed; query start excluded), **start** is from ``start()`` to the first
committed batch (polled). Where the time goes: Spark's ``durationMs`` parts
of the steady-state batches.
"""

from __future__ import annotations

import argparse
import os
import statistics
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
#: The tidemark figure over the file source's of the same pair (median over the pairs).
TARGET_RATIO = 0.8
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
#: One pair: the queries in the order they run, each tidemark one right after its file peer.
PLAN = (
    ("read", "file"),
    ("read", "tidemark"),
    ("window", "file"),
    ("window", "tidemark"),
    ("window", JVM),
)
#: Spark's progress parts, in the order a micro-batch runs them.
PARTS = ("latestOffset", "queryPlanning", "walCommit", "getBatch", "addBatch", "commitOffsets")


@dataclass
class Run:
    """One query's figures."""

    pair: int
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
    spark: Any,
    frame: Any,
    system: str,
    query: str,
    checkpoint: str,
    times: list[int],
    pair: int = 1,
) -> Run:
    """Runs ``frame`` until everything is read; the figures from Spark's progress reports."""
    name = f"{system}_{query}_{pair}"
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
        pair,
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
    """Writes the events, runs ``args.pairs`` interleaved pairs of the queries.

    Each pair runs the read (file, then tidemark), then the window (file,
    tidemark, ``window_count``); ``facts["loads"]`` holds each pair's load
    average before and after it.
    """
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
        facts["loads"] = []
        try:
            for pair in range(1, args.pairs + 1):
                load_before = load_average()
                for query, system in PLAN:
                    if (pair, query, system) == (1, "read", "tidemark"):
                        print("  a do-nothing Python source (start only) ...", flush=True)
                        facts["python_floor"] = python_floor_start(
                            spark, os.path.join(scratch, "checkpoint-nothing")
                        )
                    print(f"  pair {pair}: {system} {query} ...", flush=True)
                    if system == "file":
                        frame = file_read(spark, json_dir, files_per_batch)
                        frame = file_window(frame) if query == "window" else frame
                    else:
                        frame = tidemark_read(spark, server.uri, args.batch_events)
                        if query == "window":
                            window = tidemark_jvm_window if system == JVM else tidemark_window
                            frame = window(frame)
                    checkpoint = os.path.join(scratch, f"checkpoint-{system}-{query}-{pair}")
                    runs.append(run_query(spark, frame, system, query, checkpoint, times, pair))
                facts["loads"].append((load_before, load_average()))
        finally:
            spark.stop()
    facts["pyspark"] = package_version("pyspark")
    facts["java"] = java_version()
    return runs, facts


# --- report ------------------------------------------------------------------------------


def _find(runs: Sequence[Run], system: str, query: str, pair: int) -> Run:
    return next(r for r in runs if (r.system, r.query, r.pair) == (system, query, pair))


def _of(runs: Sequence[Run], system: str, query: str) -> list[Run]:
    return [r for r in runs if (r.system, r.query) == (system, query)]


def _ratios(runs: Sequence[Run], system: str, query: str) -> list[float]:
    """Per pair: ``system``'s steady-state events/s over the file source's for ``query``."""
    peers = {r.pair: r.events_per_s for r in _of(runs, "file", query)}
    return [r.events_per_s / peers[r.pair] for r in _of(runs, system, query)]


def _median_rate(runs: Sequence[Run], system: str, query: str) -> float:
    return statistics.median(r.events_per_s for r in _of(runs, system, query))


def _median_start(runs: Sequence[Run], system: str, query: str) -> float:
    return statistics.median(r.start_s for r in _of(runs, system, query))


def _report(args: argparse.Namespace, runs: list[Run], facts: dict[str, Any]) -> str:
    rows = [["pair", "query", "source", "steady-state events/s", "start (s)", "batches", "check"]]
    for run in runs:
        rows.append(
            [
                str(run.pair),
                run.query,
                run.system,
                f"{run.events_per_s:,.0f}",
                f"{run.start_s:.2f}",
                str(run.batches),
                run.checked,
            ]
        )
    print_table(rows)
    read_ratios = _ratios(runs, "tidemark", "read")
    win_ratios = _ratios(runs, "tidemark", "window")
    jvm_ratios = _ratios(runs, JVM, "window")
    pairs = [["pair", "read", "window", "window_count", "load before", "load after"]]
    for i, (before, after) in enumerate(facts["loads"]):
        pairs.append(
            [
                str(i + 1),
                f"{read_ratios[i]:.2f}",
                f"{win_ratios[i]:.2f}",
                f"{jvm_ratios[i]:.2f}",
                f"{before:.2f}",
                f"{after:.2f}",
            ]
        )
    print_table(pairs)
    read_ratio = statistics.median(read_ratios)
    win_ratio = statistics.median(win_ratios)
    jvm_ratio = statistics.median(jvm_ratios)
    win_rate = _median_rate(runs, "tidemark", "window")
    start_gap = max(
        _median_start(runs, "tidemark", q) - _median_start(runs, "file", q)
        for q in ("read", "window")
    )
    tm_read_start = _median_start(runs, "tidemark", "read")

    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    def spread(ratios: list[float]) -> str:
        return f"pairs {min(ratios):.2f} to {max(ratios):.2f}"

    targets = [
        f"- windowed count: {win_rate:,.0f} events/s (median; target >= "
        f"{TARGET_WINDOW_EVENTS_PER_S:,}: {verdict(win_rate >= TARGET_WINDOW_EVENTS_PER_S)}), "
        f"median {win_ratio:.2f} of the file source's ({spread(win_ratios)}; target >= "
        f"{TARGET_RATIO}: {verdict(win_ratio >= TARGET_RATIO)})",
        f"- windowed count through `window_count` (Spark's aggregation): "
        f"{_median_rate(runs, JVM, 'window'):,.0f} events/s (median), median {jvm_ratio:.2f} "
        f"of the file source's ({spread(jvm_ratios)})",
        f"- read alone: median {read_ratio:.2f} of the file source's ({spread(read_ratios)}; "
        f"target >= {TARGET_RATIO}: {verdict(read_ratio >= TARGET_RATIO)})",
        f"- start (medians): at most {start_gap:+.2f} s from the file source's (target within "
        f"{TARGET_START_GAP_S} s: {verdict(start_gap <= TARGET_START_GAP_S)}); the tidemark "
        f"read's start is {tm_read_start - facts['python_floor'][0]:+.2f} s from a "
        "do-nothing Python source's (below)",
    ]
    parts = [["query", "source", *PARTS, "total"]]
    for query, system in PLAN:
        of = _of(runs, system, query)
        parts.append(
            [
                query,
                system,
                *(f"{sum(r.parts_s[p] for r in of):.2f}" for p in PARTS),
                f"{sum(r.steady_s for r in of):.2f}",
            ]
        )
    starts = [["pair", "query", "source", "before the first batch", *PARTS, "start"]]
    for run in runs:
        first = run.first_parts_s or {}
        starts.append(
            [
                str(run.pair),
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
        f"and the files in {facts['write_s']:.1f} s. {args.pairs} interleaved pairs: each "
        "runs the file read, the tidemark read, the file window, the tidemark window and "
        "`window_count`, so each tidemark query runs right after its file peer. Steady "
        "state: events over the `triggerExecution` time of the batches after the first "
        "(start-up apart); start: `start()` to the first committed batch.",
        "",
        markdown_table(rows),
        "",
        "Each pair's ratio (tidemark steady-state events/s over the file source's of the "
        "same pair) and the load average (1 min) around the pair:",
        "",
        markdown_table(pairs),
        "",
        "Targets on this 2-core machine:",
        "",
        *targets,
        "",
        "Where the steady-state time goes (seconds summed over the batches after the first, "
        "all pairs, Spark's `durationMs` parts; `addBatch` runs the batch's tasks, "
        "`latestOffset` plans it, `walCommit` and `commitOffsets` write the checkpoint):",
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
    """Per-batch planning and task time of the read queries (all pairs), in words."""
    tm, file = _of(runs, "tidemark", "read"), _of(runs, "file", "read")

    def per_batch(of: list[Run], part: str) -> float:
        return sum(r.parts_s[part] for r in of) / max(1, sum(r.steady_batches for r in of))

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
        f"before the first pair's tidemark read, after its file read) starts in {start_s:.2f} s: "
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
    parser.add_argument("--events", type=int, default=1_000_000, help="default 1000000")
    parser.add_argument(
        "--pairs", type=int, default=3, help="interleaved file/tidemark pairs (default 3)"
    )
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
    if min(args.events, args.keys, args.batch_events, args.file_events, args.pairs) <= 0:
        print(
            "--events, --keys, --batch-events, --file-events and --pairs must be > 0",
            file=sys.stderr,
        )
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
