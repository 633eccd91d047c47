"""The EventTimeITCase on Spark, against the real ``tidemark`` source and a real store server.

The store runs in this process on a synthetic clock (no idle advancer); Spark's
Python workers reach it over gRPC. Time moves only when a test moves it
(``clock.advance`` and an idle tick), so after ``processAllAvailable()`` the
query has read everything and Spark's watermark is exactly the connector's:
each assertion can name the watermark and what must have come out by then.
"""

from __future__ import annotations

import pathlib
import uuid
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from connector import EventWriter, JsonSerializer
from examples.sensors import LAG_MS, OFFSETS_MS, write_asserting_round
from examples.spark_event_time import run_sensors_on_spark, sensor_query
from spark_adapter import tumbling_window_count, with_connector_watermark

from .conftest import BatchLog, SyntheticStore, settle, stored_json

pytestmark = [pytest.mark.slow, pytest.mark.long]

PAUSE_MS = 500  # what passes between two rounds of readings


def spark_watermark_ms(query: Any) -> int:
    """Spark's event-time watermark in the query's last progress, in epoch ms."""
    text = query.lastProgress["eventTime"]["watermark"]
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


@pytest.mark.storages("file", "jetstream")
def test_sensors_a_and_b_come_out_in_event_time_order_and_c_is_flagged_late(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """A on time, B early, C late, read with ``spark.readStream.format("tidemark")``.

    Runs the demo's own code (:func:`examples.spark_event_time.run_sensors_on_spark`)
    with the synthetic clock as its ``pause`` and ``processAllAvailable`` as
    its ``settle``. After every settle, with ``W`` the connector's watermark
    (group watermark of the store minus ``LAG_MS``): Spark's watermark is
    ``W``, the A and B readings released are exactly those with event time
    ``<= W`` (B's, stamped 1.5 s ahead, are held until then), and every C
    reading read so far is flagged late. At the end every reading came out
    exactly once.
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    table = f"sensors_{uuid.uuid4().hex[:8]}"
    store.advance(5_000)  # the idle stream's watermark is near now before the first reading
    Keys = set[tuple[str, int]]
    snapshots: list[tuple[int, Keys, Keys, list[dict[str, Any]]]] = []

    def check_settled(query: Any) -> None:
        query.processAllAvailable()
        watermark = store.group_watermark(stream) - LAG_MS
        assert spark_watermark_ms(query) == watermark
        rows = spark.sql(f"select sensor, seq, late from {table}").collect()
        released = {(r.sensor, r.seq) for r in rows if not r.late}
        late = {(r.sensor, r.seq) for r in rows if r.late}
        snapshots.append((watermark, released, late, stored_json(store.uri, stream)))

    run = run_sensors_on_spark(
        spark,
        store.uri,
        stream,
        store.clock.now_ms,
        pause=lambda: store.advance(PAUSE_MS),
        settle=check_settled,
        rounds=5,
        checkpoint=str(tmp_path / "checkpoint"),
        table=table,
    )

    held_b = 0
    for watermark, released, late, written in snapshots:
        due = {
            (r["sensor"], r["seq"]) for r in written if r["sensor"] in "AB" and r["ts"] <= watermark
        }
        assert released == due, f"at watermark {watermark}"
        assert late == {(r["sensor"], r["seq"]) for r in written if r["sensor"] == "C"}
        held_b += sum(1 for r in written if r["sensor"] == "B" and r["ts"] > watermark)
    assert held_b > 0, "B's early readings should have been held for a while"

    written = run.written
    assert len(written) == 15
    outputs = Counter((sensor, seq) for sensor, seq, _ in run.released + run.late)
    assert outputs == Counter((r["sensor"], r["seq"]) for r in written)  # each exactly once
    for sensor in "AB":
        theirs = [(s, seq, ts) for s, seq, ts in run.released if s == sensor]
        expected = sorted(
            ((r["sensor"], r["seq"], r["ts"]) for r in written if r["sensor"] == sensor),
            key=lambda reading: reading[2],
        )
        assert theirs == expected
    assert sorted(run.late) == sorted(
        (r["sensor"], r["seq"], r["ts"]) for r in written if r["sensor"] == "C"
    )
    assert run.watermarks == sorted(set(run.watermarks)) and len(run.watermarks) > 5
    assert OFFSETS_MS["C"] < -LAG_MS < OFFSETS_MS["A"] < 0 < OFFSETS_MS["B"]  # the scenario holds


def test_a_tumbling_window_closes_on_idle_ticks_without_new_events(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """The window's count comes out once idle ticks move the connector's watermark past its end.

    The connector's watermark row of a batch without events is what moves
    Spark's watermark here: no event is written after the first ones.
    """
    store = synthetic_store
    size, lag = 10_000, 1_000
    start = (store.clock.now_ms() // size + 1) * size
    store.advance_to(start)
    stream = store.create_stream(segments=2)
    readings = df_reader(spark, store.uri, stream, lag).option("timestampField", "ts").load()
    counts = tumbling_window_count(with_connector_watermark(readings), "10 seconds")
    log = BatchLog()
    query = (
        counts.writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
        with store.writer(stream) as writer:
            for key, at in [("k", 1_000), ("k", 2_000), ("j", 5_000), ("k", 9_999), ("k", 12_000)]:
                writer.write_event({"ts": start + at}, routing_key=key)
        settle(query)
        assert log.rows() == []
        cut = store.cut(stream)

        store.advance_to(start + size + lag)  # group watermark start + size + lag - 1
        settle(query)
        assert spark_watermark_ms(query) == start + size - 1  # one ms short of the window's end
        assert log.rows() == []

        batches_before = set(log.batches)
        store.advance(1)
        settle(query)
        assert store.cut(stream) == cut  # no event was written: only idle ticks
        assert spark_watermark_ms(query) == start + size
        new = {b: rows for b, rows in log.batches.items() if b not in batches_before and rows}
        assert len(new) == 1, new
        [rows] = new.values()
        window = (start, start + size)
        assert sorted(
            (r["routing_key"], _ms(r["window_start"]), _ms(r["window_end"]), r["count"], r["late"])
            for r in rows
        ) == [("j", *window, 1, False), ("k", *window, 3, False)]
        read_rows = [
            p["numInputRows"] for p in query.recentProgress if p["batchId"] > max(batches_before)
        ]
        assert sum(read_rows) == 1, read_rows  # the connector's watermark row, and nothing else
    finally:
        query.stop()


def df_reader(spark: Any, uri: str, stream: str, lag_ms: int) -> Any:
    """A streaming ``tidemark`` read of JSON events in the ingestion-time domain."""
    return (
        spark.readStream.format("tidemark")
        .option("uri", uri)
        .option("stream", stream)
        .option("timeDomain", "IngestionTime")
        .option("maxEventTimeLag", f"{lag_ms} milliseconds")
        .option("deserializer", "json")
    )


def _ms(value: datetime) -> int:
    """Epoch ms of a timestamp from ``collect`` (naive, in this process's local time)."""
    return round(value.timestamp() * 1000)


def test_with_the_sensors_assertions_spark_waits_for_c_and_moves_on_once_c_is_idle(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """The event-time domain: each sensor asserts its own event time (seed 002).

    While C (slow) asserts, Spark's watermark is C's latest assertion: A's
    and B's readings wait for it and nothing is late. Once C marks itself
    idle the watermark moves on with A and B and their readings come out
    without C; at the end every reading came out once, in event-time order
    per sensor, none late.
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    table = f"asserted_{uuid.uuid4().hex[:8]}"
    writers = {
        s: EventWriter(store.client, stream, JsonSerializer(), writer_id=f"sensor-{s}")
        for s in "ABC"
    }
    written: list[dict[str, Any]] = []
    query = sensor_query(
        spark, store.uri, stream, str(tmp_path / "checkpoint"), table, domain="EventTime"
    )

    def rows() -> list[Any]:
        return spark.sql(f"select sensor, seq, ts, late from {table}").collect()

    try:
        for seq in range(4):
            written.extend(write_asserting_round(writers, seq, store.clock.now_ms))
            store.advance(PAUSE_MS)
            settle(query)
            slowest = max(r["ts"] for r in written if r["sensor"] == "C")
            assert spark_watermark_ms(query) <= slowest, "the watermark waits for C"
            assert {(r.sensor, r.seq) for r in rows()} == {
                (r["sensor"], r["seq"]) for r in written if r["ts"] <= spark_watermark_ms(query)
            }
        held = len(rows())
        writers["C"].mark_idle()
        for seq in range(4, 7):
            written.extend(write_asserting_round(writers, seq, store.clock.now_ms, "AB"))
            store.advance(PAUSE_MS)
            settle(query)
        last_a = max(r["ts"] for r in written if r["sensor"] == "A")
        assert spark_watermark_ms(query) == last_a, "without C the watermark follows A"
        assert len(rows()) > held and {(r.sensor, r.seq) for r in rows()} >= {
            (r["sensor"], r["seq"]) for r in written if r["sensor"] in "AC"
        }
        store.client.seal_stream(*stream.split("/"))  # the end: B's early readings are due
        store.advance(PAUSE_MS)
        settle(query)
        settle(query)
    finally:
        query.stop()
    output = rows()
    assert not any(r.late for r in output), "nothing is late"
    assert Counter((r.sensor, r.seq) for r in output) == Counter(
        (r["sensor"], r["seq"]) for r in written
    )
    for sensor in "ABC":
        theirs = [r.ts for r in output if r.sensor == sensor]
        assert theirs == sorted(theirs)
