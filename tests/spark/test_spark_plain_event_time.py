"""Spark's own event-time operators on the connector's watermark, after ``event_time()``.

Each test runs one operator written the plain Spark way on
``spark_adapter.event_time(readings)`` against a real store server on a
synthetic clock (:class:`tests.spark.conftest.SyntheticStore`), over one
history: readings on both segments, then one segment idle (the store's
idle ticks carry its watermark), a reading written twice, readings far
behind the watermark (late), a restart of the query from its checkpoint
with readings written while it was down, and at the end no writes at all,
only idle ticks. The query's output is the operator's rows and, by a union
in the same query, its ``late`` rows: the route a user takes for the rows
Spark drops.

An event-by-event reference (:func:`reference_history`) says what must come
out: every reading written at least the lag behind the store's clock is on
time and the late ones are ``LATE_BY_MS`` behind, so no reading's fate
depends on where a micro-batch ends. After every settle, Spark's watermark
is the connector's (the store's group watermark less the lag), and what
came out is exactly what the reference closes at that watermark: every
window once and complete, and every late reading in the late route.
"""

from __future__ import annotations

import pathlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from connector.client import key_position
from spark_adapter import event_time, with_json_fields

from .conftest import BatchLog, SyntheticStore, ingestion_read

pytestmark = [pytest.mark.slow, pytest.mark.long]

LAG_MS = 2_000
SIZE_MS = 10_000
SLIDE_MS = 5_000
GAP_MS = 3_000
BOUND_MS = 2_000  # a reading's alarm comes within this after it
LATE_BY_MS = 35_000
STEP_MS = 2_500
#: Two keys on each of the stream's two segments (key space halves).
KEYS = {0: ("a", "c"), 1: ("b", "d")}
FIELDS = "key STRING, id STRING, v INT"


@dataclass(frozen=True)
class Reading:
    """One event written: ``late`` by construction (far behind the store's clock)."""

    key: str
    id: str
    ts: int
    v: int
    late: bool = False


@dataclass(frozen=True)
class Step:
    """What happens between two settles: the clock moves, readings are written."""

    segments: tuple[int, ...] = (0, 1)
    late: bool = False
    duplicate: bool = False
    restart: bool = False
    alarms: bool = False


HISTORY = (
    Step(alarms=True),
    Step(segments=(0,), duplicate=True, alarms=True),  # segment 1 idle: only ticks
    Step(late=True),
    Step(late=True, restart=True, alarms=True),  # written while the query is down
)
DRAIN_MS = 30_000  # the end: no writes, only idle ticks


def test_the_scenario_holds() -> None:
    assert all(key_position(k) < 0.5 for k in KEYS[0])
    assert all(key_position(k) >= 0.5 for k in KEYS[1])
    assert LATE_BY_MS > SIZE_MS + 2 * STEP_MS + LAG_MS  # late even for the batch before


# --- the history, written and read ----------------------------------------------


@dataclass
class Run:
    """What a history wrote and what the query gave, settle by settle."""

    written: list[Reading]
    alarms: list[Reading]
    settles: list[tuple[int, list[Reading], list[Reading], list[dict[str, Any]]]]


def run_history(
    spark: Any,
    store: SyntheticStore,
    tmp_path: pathlib.Path,
    operator: Callable[[DataFrame, DataFrame], DataFrame],
    joins_alarms: bool = False,
) -> Run:
    """Writes :data:`HISTORY`, running ``operator(events, alarm_events)`` with its late route.

    After each settle, records the connector's watermark (the least of the
    streams' the query reads: the alarms' too when ``joins_alarms``), what
    was written so far, and every row out so far.
    """
    start = store.clock.now_ms() + 4 * SIZE_MS
    store.advance_to(start)
    stream, alarm_stream = store.create_stream(2), store.create_stream(2)
    events = typed(event_time(ingestion_read(spark, store, stream, LAG_MS)))
    alarms = typed(event_time(ingestion_read(spark, store, alarm_stream, LAG_MS)))
    late_route = events.where("late").select(F.col("id").alias("late_id"))
    output = operator(events, alarms).unionByName(late_route, allowMissingColumns=True)
    log = BatchLog()
    run = Run([], [], [])
    read_streams = (stream, alarm_stream) if joins_alarms else (stream,)

    def start_query() -> Any:
        return (
            output.writeStream.foreachBatch(log)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .outputMode("append")
            .start()
        )

    query = start_query()
    try:
        for number, step in enumerate(HISTORY):
            if step.restart:
                query.stop()
            store.advance(STEP_MS if number else 0)
            write_step(store, stream, alarm_stream if joins_alarms else None, step, number, run)
            if step.restart:
                query = start_query()
            settle_and_record(query, store, read_streams, log, run)
        store.advance(DRAIN_MS)
        settle_and_record(query, store, read_streams, log, run)
    finally:
        query.stop()
    return run


def typed(events: DataFrame) -> DataFrame:
    """The readings' fields as columns; a user's filter after ``event_time`` is harmless."""
    return with_json_fields(events, FIELDS).where(~F.col("malformed"))


def write_step(
    store: SyntheticStore, stream: str, alarm_stream: str | None, step: Step, number: int, run: Run
) -> None:
    now = store.clock.now_ms()
    batch = [
        Reading(key, f"r{number}{key}", now - 500 - 97 * i - 13 * number, 10 * number + i)
        for segment in step.segments
        for i, key in enumerate(KEYS[segment])
    ]
    if step.late:
        batch += [
            Reading(key, f"late{number}{key}", now - LATE_BY_MS - 7 * i, 0, late=True)
            for i, key in enumerate((KEYS[0][0], KEYS[1][0]))
        ]
    if step.duplicate:  # a writer's retry: the same reading once more
        batch.append(batch[0])
    with store.writer(stream) as writer:
        for reading in batch:
            writer.write_event(_json(reading), routing_key=reading.key)
    run.written += batch
    if step.alarms and alarm_stream is not None:
        alarms = [Reading(r.key, f"alarm{r.id}", r.ts + 1_000, 0) for r in batch[:2]]
        with store.writer(alarm_stream) as writer:
            for alarm in alarms:
                writer.write_event(_json(alarm), routing_key=alarm.key)
        run.alarms += alarms


def _json(reading: Reading) -> dict[str, Any]:
    return {"key": reading.key, "id": reading.id, "ts": reading.ts, "v": reading.v}


def settle_and_record(
    query: Any, store: SyntheticStore, streams: tuple[str, ...], log: BatchLog, run: Run
) -> None:
    query.processAllAvailable()
    watermark = min(store.group_watermark(s) for s in streams) - LAG_MS
    assert spark_watermark_ms(query) == watermark, "Spark's watermark is the connector's"
    run.settles.append((watermark, list(run.written), list(run.alarms), log.rows()))


def spark_watermark_ms(query: Any) -> int:
    text = query.lastProgress["eventTime"]["watermark"]
    return ms(datetime.fromisoformat(text.replace("Z", "+00:00")))


def ms(value: datetime) -> int:
    return round(value.timestamp() * 1000)


# --- checking a run against the reference ------------------------------------------


def check(
    run: Run,
    closed: Callable[[int, list[Reading], list[Reading]], Counter[Any]],
    out: Callable[[dict[str, Any]], Any],
) -> None:
    """At every settle: what came out is what the reference closes, each once; late ones routed.

    ``closed(watermark, on_time, alarms)`` is the reference's output at a
    watermark, a Counter of rows; ``out(row)`` is a row of the query as one.
    """
    for watermark, written, alarms, rows in run.settles:
        on_time = [r for r in written if not r.late]
        got = Counter(out(row) for row in rows if row.get("late_id") is None)
        assert got == closed(watermark, on_time, alarms), f"at watermark {watermark}"
        late = sorted(row["late_id"] for row in rows if row.get("late_id") is not None)
        assert late == sorted(r.id for r in written if r.late), f"at watermark {watermark}"
    watermark, written, alarms, _ = run.settles[-1]
    assert any(r.late for r in written) and closed(watermark, written, alarms), "a real history"


def windows_of(ts: int, size: int, slide: int) -> Iterator[int]:
    """The starts of the windows of ``size`` every ``slide`` holding ``ts``."""
    last = ts - ts % slide
    return iter(range(last - size + slide, last + 1, slide))


def window_aggregates(size: int, slide: int) -> Callable[..., Counter[Any]]:
    """The reference of ``groupBy(window(...), key).agg(count, sum(v))``: closed windows."""

    def closed(watermark: int, on_time: list[Reading], alarms: list[Reading]) -> Counter[Any]:
        groups: dict[tuple[str, int], list[Reading]] = defaultdict(list)
        for reading in on_time:
            for start in windows_of(reading.ts, size, slide):
                groups[(reading.key, start)].append(reading)
        return Counter(
            (key, start, len(rs), sum(r.v for r in rs))
            for (key, start), rs in groups.items()
            if start + size <= watermark
        )

    return closed


# --- one test per operator ----------------------------------------------------------


def test_tumbling_windows_with_any_aggregate(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    def windows(events: DataFrame, alarms: DataFrame) -> DataFrame:
        return events.groupBy(F.window("event_time", f"{SIZE_MS} milliseconds"), "key").agg(
            F.count("*").alias("n"), F.sum("v").alias("total")
        )

    run = run_history(spark, synthetic_store, tmp_path, windows)
    check(run, window_aggregates(SIZE_MS, SIZE_MS), _window_row)


def test_sliding_windows(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    def windows(events: DataFrame, alarms: DataFrame) -> DataFrame:
        window = F.window("event_time", f"{SIZE_MS} milliseconds", f"{SLIDE_MS} milliseconds")
        return events.groupBy(window, "key").agg(F.count("*").alias("n"), F.sum("v").alias("total"))

    run = run_history(spark, synthetic_store, tmp_path, windows)
    check(run, window_aggregates(SIZE_MS, SLIDE_MS), _window_row)


def _window_row(row: dict[str, Any]) -> tuple[str, int, int, int]:
    return (row["key"], ms(row["window"]["start"]), row["n"], row["total"])


def test_session_windows(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    def sessions(events: DataFrame, alarms: DataFrame) -> DataFrame:
        window = F.session_window("event_time", f"{GAP_MS} milliseconds")
        return events.groupBy(window, "key").agg(F.count("*").alias("n"))

    def closed(watermark: int, on_time: list[Reading], alarms: list[Reading]) -> Counter[Any]:
        found = Counter()
        for key in sorted({r.key for r in on_time}):
            times = sorted(r.ts for r in on_time if r.key == key)
            assert all(b - a != GAP_MS for a, b in zip(times, times[1:], strict=False))
            session = [times[0]]
            for ts in [*times[1:], None]:
                if ts is not None and ts < session[-1] + GAP_MS:
                    session.append(ts)
                    continue
                if session[-1] + GAP_MS <= watermark:
                    found[(key, session[0], session[-1] + GAP_MS, len(session))] += 1
                if ts is not None:
                    session = [ts]
        return found

    def row(r: dict[str, Any]) -> tuple[str, int, int, int]:
        window = r["session_window"]
        return (r["key"], ms(window["start"]), ms(window["end"]), r["n"])

    run = run_history(spark, synthetic_store, tmp_path, sessions)
    check(run, closed, row)


def test_drop_duplicates_within_watermark(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    def deduplicated(events: DataFrame, alarms: DataFrame) -> DataFrame:
        return events.dropDuplicatesWithinWatermark(["id"]).select("id", "key")

    def closed(watermark: int, on_time: list[Reading], alarms: list[Reading]) -> Counter[Any]:
        return Counter({r.id for r in on_time})  # each at once, and once

    run = run_history(spark, synthetic_store, tmp_path, deduplicated)
    check(run, closed, lambda r: r["id"])


def test_stream_stream_left_outer_join_with_event_time_bounds(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """Each reading with the alarms up to ``BOUND_MS`` after it; without one, once passed."""

    def joined(events: DataFrame, alarms: DataFrame) -> DataFrame:
        left = events.select("key", "id", F.col("event_time").alias("at"))
        right = alarms.select(
            F.col("key").alias("alarm_key"), F.col("id").alias("alarm"), F.col("event_time")
        )
        condition = (
            (F.col("key") == F.col("alarm_key"))
            & (F.col("event_time") >= F.col("at"))
            & (F.col("event_time") <= F.col("at") + F.expr(f"interval {BOUND_MS} milliseconds"))
        )
        return left.join(right, condition, "leftOuter").select("id", "alarm")

    def closed(watermark: int, on_time: list[Reading], alarms: list[Reading]) -> Counter[Any]:
        found = Counter()
        for reading in on_time:
            matches = [
                a.id
                for a in alarms
                if a.key == reading.key and reading.ts <= a.ts <= reading.ts + BOUND_MS
            ]
            found.update((reading.id, m) for m in matches)
            if not matches and reading.ts + BOUND_MS < watermark:
                found[(reading.id, None)] += 1
        return found

    run = run_history(spark, synthetic_store, tmp_path, joined, joins_alarms=True)
    check(run, closed, lambda r: (r["id"], r["alarm"]))


class _WindowCounter(StatefulProcessor):
    """Counts each key's readings per tumbling window; an event-time timer emits the window."""

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.counts = handle.getMapState("counts", "start long", "n long")

    def handleInputRows(  # noqa: N802 (Spark's name)
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        for frame in rows:
            for stamp in frame["event_time"]:
                start = stamp.value // 1_000_000 // SIZE_MS * SIZE_MS
                known = self.counts.getValue((start,))
                if known is None:
                    self.handle.registerTimer(start + SIZE_MS)
                self.counts.updateValue((start,), ((known[0] if known else 0) + 1,))
        return iter([])

    def handleExpiredTimer(  # noqa: N802 (Spark's name)
        self,
        key: Any,
        timerValues: Any,
        expiredTimerInfo: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        start = expiredTimerInfo.getExpiryTimeInMs() - SIZE_MS
        (n,) = self.counts.getValue((start,))
        self.counts.removeKey((start,))
        yield pd.DataFrame({"key": [key[0]], "start": [start], "n": [n]})

    def close(self) -> None:
        pass


def test_transform_with_state_in_pandas_with_event_time_timers(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    def counted(events: DataFrame, alarms: DataFrame) -> DataFrame:
        return events.groupBy("key").transformWithStateInPandas(
            _WindowCounter(), "key string, start long, n long", "Append", "EventTime"
        )

    counts = window_aggregates(SIZE_MS, SIZE_MS)

    def closed(watermark: int, on_time: list[Reading], alarms: list[Reading]) -> Counter[Any]:
        return Counter((k, s, n) for (k, s, n, _), c in counts(watermark, on_time, []).items())

    provider = "spark.sql.streaming.stateStore.providerClass"
    before = spark.conf.get(provider)
    spark.conf.set(
        provider, "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    )
    try:
        run = run_history(spark, synthetic_store, tmp_path, counted)
    finally:
        spark.conf.set(provider, before)
    check(run, closed, lambda r: (r["key"], r["start"], r["n"]))
