"""Spark benchmark: what a streaming user feels, tidemark source vs Spark's file source.

    python -m bench.run spark                          # 1,000,000 events, 3 pairs
    python -m bench.run spark --events 500000 --pairs 5
    python -m bench.run spark --no-write               # keep RESULTS.md

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
  mode, into a memory sink whose windows are checked against the events.
  Tidemark reads in the event-time domain (``timeDomain`` ``EventTime``:
  the writer asserts its ``ts`` after each file's events, so the
  watermark is the event time written, with no lag); the window is
  written the Spark way, :func:`spark_adapter.event_time` then
  ``groupBy(window("event_time", ...), "routing_key").count()``, and
  twice more through the connector's helpers:
  :func:`spark_adapter.window_count` (``tidemark_jvm``) and
  :func:`spark_adapter.tumbling_window_count` (per key in Python,
  ``tidemark_python``). The file source: ``withWatermark("event_time",
  "0 seconds")`` and the same ``groupBy``. The last event written, the same
  in the store and the files, lies half a window past the others' last
  window, so both watermarks close every window of the other events and
  not the last event's: each window query must emit exactly those windows
  with exactly their events (checked), so every side does the same work.

The queries run in ``--pairs`` interleaved pairs (file read, tidemark read,
file window, the tidemark windows; then again), so that a
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
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from bench._support import (
    EVENT_BYTES,
    BenchFailure,
    StoreServerProcess,
    java_version,
    load_average,
    package_version,
    positive,
    write_store_and_files,
)
from bench.figures import Target

__all__ = [
    "Run",
    "SparkFigures",
    "file_read",
    "measure",
    "options",
    "python_floor_start",
    "run_query",
    "tidemark_read",
]

TARGET_WINDOW_EVENTS_PER_S = 150_000
#: The tidemark figure over the file source's of the same pair (median over the pairs).
TARGET_RATIO = 0.8
TARGET_START_GAP_S = 2.0
#: The tidemark windowed count through spark_adapter.window_count (Spark's aggregation).
JVM = "tidemark_jvm"
#: The tidemark windowed count through spark_adapter.tumbling_window_count (Python per key).
PYTHON = "tidemark_python"
SCOPE = "bench"
STREAM = "events"
WINDOW = "1 second"
WINDOW_MS = 1_000
# No idle ticks while the benchmark runs: 10^9 ms, about 11.6 days.
NO_IDLE_TICKS_MS = 1_000_000_000
#: The store server's flags: no idle ticks, and the writer, left open to hold the
#: event-time watermark, never timed out.
STORE_ARGS = ("--max-watermark-lag-ms", str(NO_IDLE_TICKS_MS), "--writer-idle-timeout-ms", "0")
#: One pair: the queries in the order they run, each tidemark one right after its file peer.
PLAN = (
    ("read", "file"),
    ("read", "tidemark"),
    ("window", "file"),
    ("window", "tidemark"),
    ("window", JVM),
    ("window", PYTHON),
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
    #: The windows a window query emitted (each checked against the events).
    windows: int = 0

    @property
    def events_per_s(self) -> float:
        """Steady-state events per second (0 without a steady state)."""
        return self.steady_events / self.steady_s if self.steady_s else 0.0

    @property
    def before_first_s(self) -> float:
        """Seconds from ``start()`` to the first batch's trigger."""
        return self.start_s - self.first_s


# --- data ------------------------------------------------------------------------------


def write_events(args: argparse.Namespace, uri: str, json_dir: str) -> list[int]:
    """Writes the events to the store and to JSON-lines files; returns their event times.

    The last one closes the windows of the others (see the module docstring).
    """
    return write_store_and_files(
        uri,
        f"{SCOPE}/{STREAM}",
        events=args.events,
        keys=args.keys,
        file_events=args.file_events,
        json_dir=json_dir,
        closing_window_ms=WINDOW_MS,
    )


def expected_windows(times: list[int], keys: int) -> dict[tuple[str, int], int]:
    """(key, window start ms) -> events, for every window the last event's time closes."""
    closing = times[-1]
    windows: dict[tuple[str, int], int] = {}
    for i, t in enumerate(times):
        start = t // WINDOW_MS * WINDOW_MS
        if start + WINDOW_MS <= closing:
            windows[f"k{i % keys}", start] = windows.get((f"k{i % keys}", start), 0) + 1
    return windows


# --- the queries -------------------------------------------------------------------------


def tidemark_read(spark: Any, uri: str, batch_events: int) -> Any:
    """The tidemark source over the benchmark's stream, ``batch_events`` per micro-batch.

    In the event-time domain: the watermark is the event time the writer asserted.
    """
    return (
        spark.readStream.format("tidemark")
        .option("uri", uri)
        .option("stream", f"{SCOPE}/{STREAM}")
        .option("timeDomain", "EventTime")
        .option("deserializer", "json")
        .option("timestampField", "ts")
        .option("maxEventsPerTrigger", str(batch_events))
        .load()
    )


def file_read(spark: Any, json_dir: str, files_per_batch: int) -> Any:
    """Spark's file source over the JSON-lines files, ``files_per_batch`` per micro-batch."""
    from pyspark.sql import functions as F  # noqa: N812

    return (
        spark.readStream.schema("ts long, key string, value long, pad string")
        .option("maxFilesPerTrigger", files_per_batch)
        .json(json_dir)
        .withColumn("event_time", F.timestamp_millis("ts"))
    )


def _counts(windows: Any, key_col: str) -> Any:
    """A window query's rows as the check reads them: key, window start, count, late."""
    from pyspark.sql import functions as F  # noqa: N812

    late = F.col("late") if "late" in windows.columns else F.lit(False)
    return windows.select(F.col(key_col).alias("key"), "window_start", "count", late.alias("late"))


def tidemark_window(frame: Any) -> Any:
    """The window the Spark way: ``event_time`` once, then Spark's own ``groupBy(window)``."""
    from pyspark.sql import functions as F  # noqa: N812

    import spark_adapter

    counts = (
        spark_adapter.event_time(frame)
        .groupBy(F.window("event_time", WINDOW), "routing_key")
        .count()
    )
    return _counts(counts.withColumn("window_start", F.col("window.start")), "routing_key")


def tidemark_jvm_window(frame: Any) -> Any:
    """The window through :func:`spark_adapter.window_count`."""
    import spark_adapter

    events = spark_adapter.with_connector_watermark(frame)
    return _counts(spark_adapter.window_count(events, WINDOW, key_col="routing_key"), "routing_key")


def tidemark_python_window(frame: Any) -> Any:
    """The window through :func:`spark_adapter.tumbling_window_count` (Python per key)."""
    import spark_adapter

    events = spark_adapter.with_connector_watermark(frame)
    counts = spark_adapter.tumbling_window_count(events, WINDOW, key_col="routing_key")
    return _counts(counts, "routing_key")


#: Each tidemark window query by its system name.
TIDEMARK_WINDOWS = {
    "tidemark": tidemark_window,
    JVM: tidemark_jvm_window,
    PYTHON: tidemark_python_window,
}


def file_window(frame: Any) -> Any:
    """The file source's window: ``withWatermark`` with no delay, then ``groupBy(window)``."""
    from pyspark.sql import functions as F  # noqa: N812

    counts = (
        frame.withWatermark("event_time", "0 seconds")
        .groupBy(F.window("event_time", WINDOW), "key")
        .count()
    )
    return _counts(counts.withColumn("window_start", F.col("window.start")), "key")


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
    windows: dict[tuple[str, int], int] | None = None,
) -> Run:
    """Runs ``frame`` until everything is read; the figures from Spark's progress reports.

    A window query (``query`` ``"window"``) must emit exactly ``windows``
    (:func:`expected_windows`), each once, none late.
    """
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
    emitted = 0
    if sink == "memory":
        emitted = _check_windows(spark, name, windows or {})
        checked = f"{emitted:,} windows, each exact; {checked}"
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
        emitted,
    )


def _check_windows(spark: Any, name: str, expected: dict[tuple[str, int], int]) -> int:
    """The windows of the memory sink ``name`` are ``expected``, each once, none late.

    Returns how many there are; raises :class:`BenchFailure` naming the first difference.
    """
    rows = spark.sql(f"select key, window_start, count, late from {name}").collect()
    spark.sql(f"drop view if exists {name}")
    late = [row for row in rows if row.late]
    if late:
        msg = f"{name}: {len(late)} late rows, first {late[0]}; no event should be late"
        raise BenchFailure(msg)
    emitted: dict[tuple[str, int], int] = {}
    for row in rows:
        window = (row.key, int(row.window_start.timestamp() * 1000))
        if window in emitted:
            msg = f"{name}: window {window} emitted twice"
            raise BenchFailure(msg)
        emitted[window] = row["count"]
    if emitted != expected:
        missing = sorted(set(expected) - set(emitted))[:3]
        extra = sorted(set(emitted) - set(expected))[:3]
        wrong = [(w, emitted[w], n) for w, n in expected.items() if emitted.get(w, n) != n]
        msg = (
            f"{name}: {len(emitted)} windows emitted, {len(expected)} closed; "
            f"missing {missing}, not closed {extra}, miscounted (window, got, events) {wrong[:3]}"
        )
        raise BenchFailure(msg)
    return len(emitted)


def check_same_windows(runs: list[Run]) -> None:
    """Every window query of a pair emitted as many windows as the file source's: same work."""
    files = {r.pair: r.windows for r in runs if (r.system, r.query) == ("file", "window")}
    for run in runs:
        if run.query == "window" and run.windows != files[run.pair]:
            msg = (
                f"pair {run.pair}: {run.system} emitted {run.windows} windows, "
                f"the file source {files[run.pair]}: they did not do the same work"
            )
            raise BenchFailure(msg)


def run_all(args: argparse.Namespace) -> tuple[list[Run], dict[str, Any]]:
    """Writes the events, runs ``args.pairs`` interleaved pairs of the queries.

    Each pair runs the read (file, then tidemark), then the window (file,
    then the tidemark windows of :data:`TIDEMARK_WINDOWS`), each window
    query checked against the events and against the file source's window
    count; ``facts["loads"]`` holds each pair's load average before and after it.
    """
    import spark_adapter

    facts: dict[str, Any] = {}
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="tidemark-spark-bench-") as scratch,
        StoreServerProcess(*STORE_ARGS) as server,
    ):
        json_dir = os.path.join(scratch, "json")
        print(f"writing {args.events:,} events ...", flush=True)
        began = time.perf_counter()
        times = write_events(args, server.uri, json_dir)
        facts["write_s"] = time.perf_counter() - began
        windows = expected_windows(times, args.keys)
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
                            frame = TIDEMARK_WINDOWS[system](frame)
                    checkpoint = os.path.join(scratch, f"checkpoint-{system}-{query}-{pair}")
                    runs.append(
                        run_query(spark, frame, system, query, checkpoint, times, pair, windows)
                    )
                facts["loads"].append((load_before, load_average()))
                check_same_windows([r for r in runs if r.pair == pair])
        finally:
            spark.stop()
    facts["pyspark"] = package_version("pyspark")
    facts["java"] = java_version()
    return runs, facts


# --- figures ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ratios:
    """Per pair: a tidemark query's steady-state events/s over its file peer's."""

    values: list[float]

    @property
    def median(self) -> float:
        """The median over the pairs."""
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        """The lowest pair's."""
        return min(self.values)

    @property
    def high(self) -> float:
        """The highest pair's."""
        return max(self.values)


@dataclass(frozen=True)
class SparkFigures:
    """Every query's run, the pairs' load averages, the do-nothing source's start, the settings."""

    events: int
    keys: int
    batch_events: int
    file_events: int
    pair_count: int
    write_s: float
    loads: list[tuple[float, float]]  # (before, after) each pair
    #: The do-nothing Python source's start (s), and its first batch's parts (s).
    python_floor: tuple[float, dict[str, float]]
    runs: list[Run]
    software: tuple[str, ...]
    event_bytes: int = EVENT_BYTES

    def _of(self, system: str, query: str) -> list[Run]:
        return [r for r in self.runs if (r.system, r.query) == (system, query)]

    def _ratios(self, system: str, query: str) -> Ratios:
        peers = {r.pair: r.events_per_s for r in self._of("file", query)}
        return Ratios([r.events_per_s / peers[r.pair] for r in self._of(system, query)])

    def _median_rate(self, system: str, query: str) -> float:
        return statistics.median(r.events_per_s for r in self._of(system, query))

    def _median_start(self, system: str, query: str) -> float:
        return statistics.median(r.start_s for r in self._of(system, query))

    @property
    def files_per_trigger(self) -> int:
        """JSON files per micro-batch of the file source."""
        return self.batch_events // self.file_events

    @property
    def ratios(self) -> dict[str, Ratios]:
        """Per pair, by the tidemark query.

        ``read``, ``window`` (the Spark way), ``window_count``, ``tumbling_window_count``.
        """
        return {
            "read": self._ratios("tidemark", "read"),
            "window": self._ratios("tidemark", "window"),
            "window_count": self._ratios(JVM, "window"),
            "tumbling_window_count": self._ratios(PYTHON, "window"),
        }

    @property
    def pairs(self) -> list[tuple[float, float, float, float, float, float]]:
        """Each pair's ratios (as :attr:`ratios`, in order) and its load before and after."""
        read, window, jvm, python = (r.values for r in self.ratios.values())
        return [
            (read[i], window[i], jvm[i], python[i], before, after)
            for i, (before, after) in enumerate(self.loads)
        ]

    @property
    def window_rate(self) -> float:
        """The tidemark windowed count's (the Spark way) median steady-state events/s."""
        return self._median_rate("tidemark", "window")

    @property
    def jvm_rate(self) -> float:
        """The median steady-state events/s through ``window_count``."""
        return self._median_rate(JVM, "window")

    @property
    def python_rate(self) -> float:
        """The median steady-state events/s through ``tumbling_window_count``."""
        return self._median_rate(PYTHON, "window")

    @property
    def start_gap(self) -> float:
        """The larger of the read's and the window's median start beyond the file source's, s."""
        return max(
            self._median_start("tidemark", q) - self._median_start("file", q)
            for q in ("read", "window")
        )

    @property
    def read_start_over_floor(self) -> float:
        """The tidemark read's median start beyond the do-nothing Python source's, s."""
        return self._median_start("tidemark", "read") - self.python_floor[0]

    @property
    def part_sums(self) -> list[tuple[str, str, dict[str, float], float]]:
        """(query, source, seconds of each of :data:`PARTS`, total), summed over the pairs."""
        sums = []
        for query, system in PLAN:
            of = self._of(system, query)
            parts = {p: sum(r.parts_s[p] for r in of) for p in PARTS}
            sums.append((query, system, parts, sum(r.steady_s for r in of)))
        return sums

    @property
    def per_batch(self) -> dict[str, dict[str, float]]:
        """The read queries' seconds per steady-state batch, by source and part."""

        def per_batch(of: list[Run], part: str) -> float:
            return sum(r.parts_s[part] for r in of) / max(1, sum(r.steady_batches for r in of))

        return {
            system: {part: per_batch(self._of(system, "read"), part) for part in PARTS}
            for system in ("tidemark", "file")
        }

    @property
    def floor(self) -> dict[str, float]:
        """The do-nothing Python source, s: ``start``, ``before`` its first batch, ``tasks``."""
        start_s, parts = self.python_floor
        return {
            "start": start_s,
            "before": start_s - parts["triggerExecution"],
            "tasks": parts["addBatch"],
        }

    @property
    def targets(self) -> dict[str, Target]:
        """The windowed count's rate and ratio, the read's ratio, the start beside the file's."""
        ratios = self.ratios
        return {
            "window_rate": Target(self.window_rate, ">=", TARGET_WINDOW_EVENTS_PER_S, "events/s"),
            "window_ratio": Target(ratios["window"].median, ">=", TARGET_RATIO),
            "read_ratio": Target(ratios["read"].median, ">=", TARGET_RATIO),
            "start_gap": Target(self.start_gap, "<=", TARGET_START_GAP_S, "s"),
        }


# --- entry point -------------------------------------------------------------------------


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(
        prog="spark_bench",
        description="Steady-state throughput and query start: tidemark vs Spark's file source.",
    )
    parser.add_argument("--events", type=positive, default=1_000_000, help="default 1000000")
    parser.add_argument(
        "--pairs", type=positive, default=3, help="interleaved file/tidemark pairs (default 3)"
    )
    parser.add_argument("--keys", type=positive, default=10, help="routing keys (default 10)")
    parser.add_argument(
        "--batch-events", type=positive, default=100_000, help="events per micro-batch (100000)"
    )
    parser.add_argument(
        "--file-events", type=positive, default=25_000, help="events per JSON file (25000)"
    )
    return parser


def measure(args: argparse.Namespace) -> SparkFigures:
    """Writes the events and runs the pairs of queries."""
    if args.batch_events % args.file_events:
        msg = "--batch-events must be a multiple of --file-events"
        raise BenchFailure(msg)
    runs, facts = run_all(args)
    return SparkFigures(
        events=args.events,
        keys=args.keys,
        batch_events=args.batch_events,
        file_events=args.file_events,
        pair_count=args.pairs,
        write_s=facts["write_s"],
        loads=facts["loads"],
        python_floor=facts["python_floor"],
        runs=runs,
        software=(f"pyspark {facts['pyspark']}", facts["java"]),
    )
