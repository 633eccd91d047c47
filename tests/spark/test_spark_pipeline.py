"""Pipelines of Spark queries joined by ``tidemark`` streams, each stage with its own watermark.

Stage one writes with ``df.writeStream.format("tidemark")``; stage two reads
that stream in the ingestion-time domain, so its watermark is the store's
watermark of the stream between them: an output of stage one is stamped
when it is written, after everything stage one emitted before it, and never
falls behind stage two's watermark while stage two is still to read it.
Everything runs against a real store server on a synthetic clock
(:class:`tests.spark.conftest.SyntheticStore`).
"""

from __future__ import annotations

import json
import pathlib
from collections import Counter
from typing import Any

import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F  # noqa: N812

from spark_adapter import order_by_event_time, with_connector_watermark

from . import window_max as window_max_module
from .conftest import BatchLog, SyntheticStore, ingestion_read, settle, stored_json
from .window_max import window_max

pytestmark = [pytest.mark.slow, pytest.mark.long]

cloudpickle.register_pickle_by_value(window_max_module)

S = 1_000  # ms per second


def start(df: Any, sink: Any, checkpoint: pathlib.Path, **options: str) -> Any:
    """Starts ``df`` in append mode into ``sink``: a ``foreachBatch`` function or ``tidemark``."""
    writer = df.writeStream.outputMode("append").option("checkpointLocation", str(checkpoint))
    if callable(sink):
        return writer.foreachBatch(sink).start()
    return writer.format(sink).options(**options).start()


def test_chained_aggregations_keep_the_window_maximum_a_global_watermark_drops(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """Seed 004's example: a 3 s window's maximum, then a 10 s aggregation of the maxima.

    Readings of one sensor at the seed's times t (stamped ``minute + t - 1``
    seconds, so that windows [1, 4), [4, 7) and [1, 11) are aligned), in
    three micro-batches: 6, 4, 5 at 1, 2, 3 (one 3 s window, maximum 6 at
    1), then 7 at 4 and an early 8 at 40, then 9 at 5 (window [4, 7), so
    its maximum is 9). Op1 takes each 3 s window's maximum (the element
    keeps its own time); Op2 the maximum and the count of those per 10 s
    window. Correct: Op2's window [1, 11) has 2 maxima, the highest 9 at 5.

    With the connector, Op1 is one query and Op2 another, joined by a
    ``tidemark`` stream: Op2's watermark is that stream's own, a watermark
    per operation as the seed proposes, and the early 8 moves neither (the
    watermarks follow ingestion time, not the event times seen). Spark runs
    no two ``applyInPandasWithState`` in one query ("Multiple
    applyInPandasWithStates are not supported") and refuses an append-mode
    ``groupBy(window("event_time"))`` with the watermark on the connector's
    column, so one query cannot chain them.

    Plain Spark with ``withWatermark("event_time", "0 seconds")`` has one
    global watermark, the highest event time seen: the early 8 moves it to
    40, so 9 is late for Op1 and dropped. With
    ``spark.sql.streaming.statefulOperator.allowMultiple`` false (the
    single global watermark of the seed: every operator judges late rows
    against the current batch's watermark, Spark's earlier behaviour), Op1's
    maxima come out in the batch whose watermark is already 40 and Op2
    drops them as late: Op2 emits nothing for [1, 11), the seed's drop.
    With pyspark 4.1's default (late rows judged against the previous
    batch's watermark) Op2 keeps them, but without the dropped 9 it reports
    7 as the maximum. Both plain runs are asserted below, as measured.
    """
    store = synthetic_store
    lag = 1_000
    minute = (store.clock.now_ms() // 60_000 + 1) * 60_000
    store.advance_to(minute - 2 * S)  # readings stamped up to 5 s ahead of their ingestion
    readings, maxima = store.create_stream(segments=2), store.create_stream(segments=2)

    # The connector: Op1 into the stream `maxima`, Op2 reading it.
    op1 = window_max(
        with_connector_watermark(ingestion_read(spark, store, readings, lag)).withColumn(
            "value", F.get_json_object("event", "$.value").cast("long")
        ),
        3 * S,
    )
    op1_out = op1.select(
        F.col("routing_key").alias("sensor"),
        F.to_json(F.struct("value", "ts", "n", "late")).alias("body"),
    )
    stage_one = start(
        op1_out,
        "tidemark",
        tmp_path / "one",
        uri=store.uri,
        stream=maxima,
        routingKeyColumn="sensor",
        eventColumn="body",
    )
    op2_log = BatchLog()
    op2 = window_max(
        with_connector_watermark(ingestion_read(spark, store, maxima, lag)).withColumn(
            "value", F.get_json_object("event", "$.value").cast("long")
        ),
        10 * S,
    )
    stage_two = start(op2, op2_log, tmp_path / "two")

    # Plain Spark, one global watermark on the event time.
    plain_source = (
        spark.readStream.format("tidemark")
        .option("uri", store.uri)
        .option("stream", readings)
        .option("deserializer", "json")
        .option("timestampField", "ts")
        .load()
        .where("kind = 'event'")
        .withColumn("value", F.get_json_object("event", "$.value").cast("long"))
        .withWatermark("event_time", "0 seconds")
    )
    plain = (
        plain_source.groupBy(F.window("event_time", "3 seconds"))
        .agg(F.max(F.struct("value", "event_time")).alias("m"))
        .select(F.col("m.value").alias("value"), F.col("m.event_time").alias("ts"))
        .groupBy(F.window("ts", "10 seconds"))
        .agg(F.count("*").alias("n"), F.max("value").alias("value"))
    )
    single_log, default_log = BatchLog(), BatchLog()
    spark.conf.set("spark.sql.streaming.statefulOperator.allowMultiple", "false")
    try:
        single = start(plain, single_log, tmp_path / "single")  # a query keeps its session's conf
    finally:
        spark.conf.unset("spark.sql.streaming.statefulOperator.allowMultiple")
    default = start(plain, default_log, tmp_path / "default")
    queries = [stage_one, stage_two, single, default]
    try:
        settle(*queries)
        with store.writer(readings) as writer:
            for batch in ([(6, 1), (4, 2), (5, 3)], [(7, 4), (8, 40)], [(9, 5)]):
                for value, second in batch:
                    writer.write_event({"value": value, "ts": minute + (second - 1) * S}, "s1")
                writer.flush()
                settle(*queries)
        single.stop()
        default.stop()

        def plain_result(log: BatchLog) -> list[tuple[int, int, int]]:
            return [
                (round(r["window"].start.timestamp() * 1000) - minute, r["n"], r["value"])
                for r in log.rows()
            ]

        assert plain_result(single_log) == []  # both maxima dropped, and 9 before them
        assert plain_result(default_log) == [(0, 2, 7)]  # 9 dropped: the maximum is wrong
        assert stored_json(store.uri, maxima) == []  # the connector's watermark is before 3 s yet

        for window_end in (3 * S, 6 * S, 10 * S):
            store.advance_to(minute + window_end + lag + 1)  # watermark: the window's end
            settle(stage_one, stage_two)
            if window_end == 6 * S:
                assert op2_log.rows() == []  # Op2's window is open: nothing dropped, nothing yet
    finally:
        for query in queries:
            query.stop()

    assert stored_json(store.uri, maxima) == [
        {"value": 6, "ts": minute, "n": 3, "late": False},
        {"value": 9, "ts": minute + 4 * S, "n": 2, "late": False},
    ]
    assert [
        (r["window_start"] - minute, r["window_end"] - minute, r["value"], r["ts"] - minute)
        + (r["n"], r["late"])
        for r in op2_log.rows()
    ] == [(0, 10 * S, 9, 4 * S, 2, False)]


def test_a_tidemark_sink_feeds_a_second_query_that_orders_by_event_time(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """Stage one cleans raw readings into a stream; stage two orders them by event time.

    Stage one (processing time) drops malformed readings and writes the rest
    with the ``tidemark`` sink, keyed by sensor. Stage two reads that stream
    with ingestion-time watermarks and ``order_by_event_time``: each sensor's
    readings come out in event-time order, the stale ones flagged late, each
    reading exactly once end to end.
    """
    store = synthetic_store
    lag = 1_000
    raw, clean = store.create_stream(segments=2), store.create_stream(segments=2)
    store.advance(5 * S)  # the idle streams' watermarks are near now

    parsed = (
        spark.readStream.format("tidemark")
        .option("uri", store.uri)
        .option("stream", raw)
        .option("deserializer", "json")
        .load()
        .where("kind = 'event'")
        .select(
            F.get_json_object("event", "$.sensor").alias("sensor"),
            F.get_json_object("event", "$.ts").cast("long").alias("ts"),
            F.get_json_object("event", "$.reading").cast("double").alias("reading"),
        )
        .where("sensor is not null and ts is not null and reading is not null")
    )
    cleaned = parsed.select("sensor", F.to_json(F.struct("sensor", "ts", "reading")).alias("json"))
    stage_one = start(
        cleaned,
        "tidemark",
        tmp_path / "one",
        uri=store.uri,
        stream=clean,
        routingKeyColumn="sensor",
        eventColumn="json",
    )
    log = BatchLog()
    ordered = order_by_event_time(
        with_connector_watermark(ingestion_read(spark, store, clean, lag))
    )
    stage_two = start(ordered, log, tmp_path / "two")

    valid: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    try:
        settle(stage_one, stage_two)
        for round_ in range(2):
            now = store.clock.now_ms()
            with store.writer(raw) as writer:
                for sensor in ("a", "b", "c"):
                    for ahead in (300, 100, 200, 0):  # out of order within the sensor
                        value = float(round_ * 1000 + ahead)
                        reading = {"sensor": sensor, "ts": now + ahead, "reading": value}
                        writer.write_event(reading, sensor)
                        valid.append(reading)
                    old = {"sensor": sensor, "ts": now - 5 * S, "reading": -1.0}
                    writer.write_event(old, sensor)  # behind the watermark: late
                    stale.append(old)
                    writer.write_event({"sensor": sensor, "reading": 1.0}, sensor)  # no ts
                    writer.write_event("not json at all", sensor)
            settle(stage_one, stage_two)
            store.advance(700)
        store.advance(2 * lag)  # past every reading
        settle(stage_one, stage_two)
    finally:
        stage_one.stop()
        stage_two.stop()

    assert Counter(map(json.dumps, stored_json(store.uri, clean))) == Counter(
        json.dumps(r) for r in valid + stale
    )
    out = [(json.loads(r["event"]), r["late"]) for r in log.rows()]
    assert Counter(json.dumps(e) for e, _ in out) == Counter(json.dumps(r) for r in valid + stale)
    assert sorted((e["sensor"], e["ts"]) for e, late in out if late) == sorted(
        (r["sensor"], r["ts"]) for r in stale
    )
    for sensor in ("a", "b", "c"):
        on_time = [e["ts"] for e, late in out if not late and e["sensor"] == sensor]
        assert on_time == sorted(r["ts"] for r in valid if r["sensor"] == sensor)
