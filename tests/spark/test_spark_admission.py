"""Admission control of the real ``tidemark`` source: read limits, Trigger.AvailableNow, progress.

Against a real store server on a synthetic clock (see
:class:`tests.spark.conftest.SyntheticStore`); Spark's Python workers and
its source process reach it over gRPC.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from connector.reader.source import Frontier
from spark_adapter import order_by_event_time, with_connector_watermark

from .conftest import BatchLog, SyntheticStore, settle
from .test_spark_streaming import KEYS, event_rows, key_seq, source, write_rounds

pytestmark = pytest.mark.slow


def test_available_now_reads_what_was_there_closes_its_windows_and_stops(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """Bounded batches up to the tails at start; the target's watermark releases them; it ends.

    Events written while the query runs (here: during its first batch) are
    not read: the query reads what was there when it started.
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    keys = KEYS[:4]
    written = write_rounds(store, stream, range(3), keys)  # 12 events at the same instant
    store.advance(1_000)  # the writers stop; idle ticks pass every event by 500 ms

    def write_more(batch_id: int) -> None:
        if batch_id == 0:
            write_rounds(store, stream, [99], keys)

    readings = source(
        spark,
        store,
        stream,
        timeDomain="IngestionTime",
        maxEventTimeLag="500 milliseconds",
        maxEventsPerTrigger="5",
    )
    log = BatchLog(after_first=write_more)
    query = (
        order_by_event_time(with_connector_watermark(readings))
        .writeStream.foreachBatch(log)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        assert query.awaitTermination(180), "an AvailableNow query must stop by itself"
    finally:
        query.stop()
    released = log.rows()
    assert sorted(key_seq(r) for r in released) == sorted(written)
    assert not any(r["late"] for r in released)
    inputs = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert len(inputs) >= 3 and max(inputs) <= 6, inputs  # 5 events (and a watermark row)


def test_progress_reports_the_tails_so_it_shows_how_far_behind_the_query_is(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = synthetic_store
    stream = store.create_stream(segments=2)
    write_rounds(store, stream, range(5), KEYS[:4])  # 20 events, at most 5 a batch
    tails = store.cut(stream)
    log = BatchLog()
    query = (
        source(spark, store, stream, maxEventsPerTrigger="5")
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
    finally:
        query.stop()
    assert len(event_rows(log.rows())) == 20
    progress = [p["sources"][0] for p in query.recentProgress if p["numInputRows"]]
    reported = [json.loads(p["latestOffset"]) for p in progress]
    ends = [json.loads(p["endOffset"]) for p in progress]

    def positions(offset: dict[str, Any]) -> dict[str, int]:
        cursors = Frontier.from_dict(offset).state.cursors
        return {s: cursor.offset for s, cursor in cursors.items()}

    assert all(positions(r) == tails for r in reported)  # the tails, from the first batch on
    assert positions(ends[0]) != tails  # while the batches were behind them
    assert positions(ends[-1]) == tails


def test_offsets_in_the_checkpoint_are_nested_json_with_a_column_per_field(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = synthetic_store
    stream = store.create_stream(segments=2)
    write_rounds(store, stream, range(2), KEYS[:2])
    checkpoint = tmp_path / "checkpoint"
    query = (
        source(spark, store, stream)
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        settle(query)
    finally:
        query.stop()
    lines = (checkpoint / "offsets" / "0").read_text().splitlines()
    offset = json.loads(lines[-1])  # the source's offset, after Spark's version and metadata
    assert isinstance(offset["state"], dict) and isinstance(offset["ends"], dict)
    columns = offset["state"]["columns"]
    assert all(isinstance(columns[c], list | dict) for c in ("offsets", "watermarks", "ends"))
    assert len(Frontier.from_dict(offset).state.cursors) == 2
