"""The event-time helpers, on a scripted stream (a stand-in for the connector's reader).

The input is :mod:`tests.spark.scripted_source`: a test-only Python streaming
data source that replays scripted micro-batches with the ``tidemark`` columns,
including the one ``watermark`` row per batch the connector emits. Each
scripted batch is one micro-batch, so the tests can say in which micro-batch
something must come out. Times are seconds since the epoch, written as ms.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import threading
from typing import Any

import pytest

from connector.errors import InvalidArgumentError
from spark_adapter import (
    order_by_event_time,
    split_late,
    tumbling_window_count,
    window_count,
    with_connector_watermark,
)

from .scripted_source import script

pytestmark = pytest.mark.slow

S = 1000  # ms per second


def scripted(spark: Any, *batches: Any) -> Any:
    return spark.readStream.format("tidemark_scripted").option("script", script(*batches)).load()


def run_collecting(df: Any, tmp_path: pathlib.Path) -> tuple[list[tuple[int, dict[str, Any]]], Any]:
    """Runs ``df`` to the end of its script; returns (batch id, row) pairs and the query."""
    seen: list[tuple[int, dict[str, Any]]] = []
    lock = threading.Lock()

    def collect(batch: Any, batch_id: int) -> None:
        rows = [row.asDict() for row in batch.collect()]
        with lock:
            seen.extend((batch_id, row) for row in rows)

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .outputMode("append")
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return seen, query


def spark_watermarks(query: Any) -> list[str]:
    """Spark's watermark in each micro-batch the query ran, in batch order."""
    return [
        p["eventTime"]["watermark"] for p in query.recentProgress if "watermark" in p["eventTime"]
    ]


def test_watermark_rows_advance_spark_watermark_and_only_events_come_out(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    df = scripted(
        spark,
        (5 * S, [("A", "a", 10 * S)]),
        (20 * S, []),  # a batch without events: only its watermark row
        (30 * S, []),
        (35 * S, [("A", "b", 40 * S)]),
    )
    seen, query = run_collecting(with_connector_watermark(df), tmp_path)
    assert [(row["kind"], row["event"]) for _, row in seen] == [("event", "a"), ("event", "b")]
    # The watermark of each batch is the highest connector watermark of the batches before.
    assert spark_watermarks(query)[:4] == [
        "1970-01-01T00:00:00.000Z",
        "1970-01-01T00:00:05.000Z",
        "1970-01-01T00:00:20.000Z",
        "1970-01-01T00:00:30.000Z",
    ]


def test_a_plain_kind_filter_would_be_pushed_below_withWatermark(spark: Any) -> None:
    """Why with_connector_watermark's filter also reads ``watermark`` (see its docstring)."""
    df = scripted(spark, (5 * S, []))
    plain = df.withWatermark("watermark", "0 seconds").where("kind = 'event'")
    ours = with_connector_watermark(df)

    def filter_above_watermark(frame: Any) -> bool:
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            frame.explain(extended=True)
        plan = (
            text.getvalue().split("== Optimized Logical Plan ==")[1].split("== Physical Plan ==")[0]
        )
        return plan.index("Filter") < plan.index("EventTimeWatermark")

    assert not filter_above_watermark(plain)
    assert filter_above_watermark(ours)
    # A user's own filter after it stays above too: below, it would drop the watermark rows.
    users = with_connector_watermark(df).where("routing_key <> 'x'")
    assert filters_below_watermark(users) == []


def filters_below_watermark(frame: Any) -> list[str]:
    """The filters of the optimized logical plan below its EventTimeWatermark."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        frame.explain(extended=True)
    plan = text.getvalue().split("== Optimized Logical Plan ==")[1].split("== Physical Plan ==")[0]
    below = plan[plan.index("EventTimeWatermark") :].splitlines()
    return [line for line in below if "Filter" in line]


def test_order_by_event_time_releases_in_order_and_reports_late_events(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    df = scripted(
        spark,
        # batch 0 (Spark watermark 0): A and B are on time; B happened before A.
        (
            10 * S,
            [("k", "A", 20 * S), ("k", "B", 15 * S), ("other", "X", 12 * S), ("edge", "E", 30 * S)],
        ),
        # batch 1 (Spark watermark 10 s): C happened at 5 s, it is late; N has no time.
        (30 * S, [("k", "C", 5 * S), ("k", "N", None)]),
        # batch 2 (Spark watermark 30 s): B, A and X are due; D is on time and held.
        (30 * S, [("k", "D", 40 * S)]),
    )
    seen, _ = run_collecting(order_by_event_time(with_connector_watermark(df)), tmp_path)
    by_key = [
        (batch, row["event"], row["late"]) for batch, row in seen if row["routing_key"] == "k"
    ]
    assert by_key == [(1, "C", True), (1, "N", True), (2, "B", False), (2, "A", False)]
    # Keys without new events are released by the event-time timeout, up to and including W.
    others = [(b, row["event"], row["late"]) for b, row in seen if row["routing_key"] != "k"]
    assert sorted(others) == [(2, "E", False), (2, "X", False)]
    released = {row["event"]: row for _, row in seen}
    assert set(released["A"]) == {*df.columns, "late"}
    assert released["A"]["event_time"].timestamp() == 20  # columns pass through unchanged


def test_split_late_separates_on_time_and_late_rows(spark: Any) -> None:
    """split_late is two filters on ``late``; a static frame shows it without a stream."""
    ordered = spark.createDataFrame(
        [("A", False), ("C", True), ("B", False)], "event string, late boolean"
    )
    on_time, late = split_late(ordered)
    assert "late" not in on_time.columns and "late" not in late.columns
    assert [r["event"] for r in on_time.collect()] == ["A", "B"]
    assert [r["event"] for r in late.collect()] == ["C"]


def test_tumbling_window_count_emits_each_window_once_the_watermark_passes_its_end(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    df = scripted(
        spark,
        # batch 0 (watermark 0): windows [0,10) gets 2, [10,20) gets 1; j's [20,30) never closes.
        (8 * S, [("k", "e1", 1 * S), ("k", "e2", 5 * S), ("k", "e3", 12 * S), ("j", "x", 25 * S)]),
        # batch 1 (watermark 8 s): 9 s is still in the open window [0,10).
        (15 * S, [("k", "e4", 9 * S)]),
        # batch 2 (watermark 15 s): [0,10) closes; 3 s arrives after its window closed.
        (15 * S, [("k", "e5", 3 * S)]),
        # batch 3 (watermark 15 s): an event without a time; then 20 s closes [10,20) in batch 4.
        (20 * S, [("k", "e6", None)]),
    )
    counts = tumbling_window_count(with_connector_watermark(df), "10 seconds")
    seen, _ = run_collecting(counts, tmp_path)

    def seconds(t: Any) -> float | None:
        return None if t is None else t.timestamp()

    rows = [
        (batch, seconds(row["window_start"]), seconds(row["window_end"]), row["count"], row["late"])
        for batch, row in seen
    ]
    assert sorted(rows, key=repr) == sorted(
        [
            (2, 0, 10, 3, False),
            (2, 0, 10, 1, True),
            (3, None, None, 1, True),
            (4, 10, 20, 1, False),
        ],
        key=repr,
    )
    assert {row["routing_key"] for _, row in seen} == {"k"}


def test_window_count_aggregates_in_the_jvm_on_the_connector_watermark(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    """The script above through Spark's own aggregation, plus one event Spark drops as late.

    Spark judges lateness by the watermark of the batch before (8 s when the
    3 s event arrives in batch 2), so that event still counts in [0, 10),
    whose row comes in batch 2 as above. The 4 s event of batch 3 comes when
    even that watermark (15 s) has passed its window: Spark drops it and
    counts it in its progress. The event without a time is filtered out.
    """
    df = scripted(
        spark,
        (8 * S, [("k", "e1", 1 * S), ("k", "e2", 5 * S), ("k", "e3", 12 * S), ("j", "x", 25 * S)]),
        (15 * S, [("k", "e4", 9 * S)]),
        (15 * S, [("k", "e5", 3 * S)]),
        (20 * S, [("k", "e6", None), ("k", "e7", 4 * S)]),
    )
    counts = window_count(with_connector_watermark(df), "10 seconds")
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        counts.explain()
    seen, query = run_collecting(counts, tmp_path)

    rows = [
        (batch, row["window_start"].timestamp(), row["window_end"].timestamp(), row["count"])
        for batch, row in seen
    ]
    assert sorted(rows) == [(2, 0, 10, 4), (4, 10, 20, 1)]
    dropped = [
        operator["numRowsDroppedByWatermark"]
        for progress in query.recentProgress
        for operator in progress["stateOperators"]
    ]
    assert sum(dropped) == 1
    for python_operator in ("InPandas", "EvalPython"):
        assert python_operator not in plan.getvalue()


def test_helpers_name_a_missing_column(spark: Any) -> None:
    df = scripted(spark, (5 * S, [])).drop("event_time")
    with pytest.raises(InvalidArgumentError, match="'event_time'"):
        order_by_event_time(df)
    with pytest.raises(InvalidArgumentError, match="window"):
        tumbling_window_count(scripted(spark, (5 * S, [])), "0 seconds")
