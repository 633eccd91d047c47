"""Streaming and batch reads of the real ``tidemark`` source: exactly once, scaling, limits, cuts.

Every test runs Spark against a real store server in this process on a
synthetic clock (:class:`tests.spark.conftest.SyntheticStore`); Spark's
Python workers reach it over gRPC. Nothing moves unless the test writes or
advances the clock, so ``processAllAvailable()`` returns once the query has
read everything.
"""

from __future__ import annotations

import json
import pathlib
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import pytest
from pyspark.errors.exceptions.captured import StreamingQueryException

from connector import StreamManager
from connector.framing import iter_frames
from spark_adapter import order_by_event_time, with_connector_watermark
from tests.conftest import wait_until

from .conftest import BatchLog, SyntheticStore, read_to_end, settle

pytestmark = [pytest.mark.slow, pytest.mark.long]

KEYS = [f"k{i}" for i in range(12)]  # spread over every segment of the scalings below


def source(spark: Any, store: SyntheticStore, stream: str, **options: str) -> Any:
    """A streaming ``tidemark`` read of ``stream`` with JSON events."""
    settings = {"uri": store.uri, "stream": stream, "deserializer": "json", **options}
    return spark.readStream.format("tidemark").options(**settings).load()


def write_rounds(
    store: SyntheticStore, stream: str, seqs: Iterable[int], keys: list[str] = KEYS
) -> list[tuple[str, int]]:
    """Writes ``{"key", "seq"}`` for each seq and key (seq-major); durable on return."""
    written = []
    with store.writer(stream) as writer:
        for seq in seqs:
            for key in keys:
                writer.write_event({"key": key, "seq": seq}, routing_key=key)
                written.append((key, seq))
    return written


def key_seq(row: dict[str, Any]) -> tuple[str, int]:
    event = json.loads(row["event"])
    assert event["key"] == row["routing_key"]
    return event["key"], event["seq"]


def event_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if row["kind"] == "event"]


# --- a regression: Spark's own late-row filter --------------------------------


def test_no_event_is_dropped_while_the_connector_watermark_stands_still(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """Events keep coming while one segment is idle and the clock stands: none may vanish.

    The group watermark cannot rise (segment 1 gets neither events nor
    ticks), so several batches carry the same ``watermark`` value. Spark's
    stateful operator drops every input row whose watermarked column is at
    or below the watermark of the batch before (its late-row filter); while
    event rows carried that value, every event after the first batch's was
    silently lost here (the fix: :func:`with_connector_watermark` nulls it).
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    lag = "500 milliseconds"
    ordered = order_by_event_time(
        with_connector_watermark(
            source(spark, store, stream, timeDomain="IngestionTime", maxEventTimeLag=lag)
        )
    )
    log = BatchLog()
    query = (
        ordered.writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
        stuck = store.group_watermark(stream)
        for seq in range(5):  # one key, so one segment; every batch is its own micro-batch
            write_rounds(store, stream, [seq], keys=["k2"])
            settle(query)
        assert store.group_watermark(stream) == stuck  # the watermark stood still all along
        assert log.rows() == []  # all held: none is due yet
        store.advance(1_000)  # past every event
        settle(query)
    finally:
        query.stop()
    assert [(key_seq(r), r["late"]) for r in log.rows()] == [(("k2", s), False) for s in range(5)]


# --- exactly once across restarts ---------------------------------------------


def file_query(spark: Any, store: SyntheticStore, stream: str, base: pathlib.Path) -> Any:
    """Events into JSON files under ``base/out`` (Spark's exactly-once file sink)."""
    events = source(spark, store, stream, maxEventsPerTrigger="6").where("kind = 'event'")
    return (
        events.select("routing_key", "event", "segment", "offset")
        .writeStream.format("json")
        .option("path", str(base / "out"))
        .option("checkpointLocation", str(base / "checkpoint"))
        .start()
    )


@pytest.mark.storages("file", "jetstream")
def test_a_restarted_query_continues_from_its_checkpoint_exactly_once(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """Three runs on one checkpoint, events written between them: each event lands once.

    The sink is Spark's file sink, whose own log makes its output exactly
    once; what this test checks is the source: a restarted query must read
    from its checkpointed offsets, neither re-reading nor skipping. (The
    memory sink would not do: pyspark 4.1 refuses to restart an append-mode
    memory-sink query from its checkpoint, "This query does not support
    recovering from checkpoint location".) The second run is stopped
    while batches flow, after its first new batch; each run keeps the
    ``maxEventsPerTrigger`` limit, the first batch after a restart included.
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    written = write_rounds(store, stream, range(2))  # 24 events
    progress: list[dict[str, Any]] = []

    first = file_query(spark, store, stream, tmp_path)
    settle(first)
    first.stop()
    progress += first.recentProgress
    written += write_rounds(store, stream, range(2, 6))

    second = file_query(spark, store, stream, tmp_path)
    last = first.lastProgress["batchId"]
    wait_until(
        lambda: (second.lastProgress or {}).get("batchId", -1) > last,
        timeout=60,
        what="a batch of the restarted query",
    )
    second.stop()
    progress += second.recentProgress
    written += write_rounds(store, stream, range(6, 8))

    third = file_query(spark, store, stream, tmp_path)
    settle(third)
    third.stop()
    progress += third.recentProgress

    out = spark.read.json(str(tmp_path / "out")).collect()
    assert Counter(key_seq(r.asDict()) for r in out) == Counter(written)
    assert len({(r.segment, r.offset) for r in out}) == len(written) == 96
    sizes = [p["numInputRows"] for p in progress]
    # A batch stopped after its sink commit is read again (the file sink skips it): >= 96.
    assert max(sizes) == 6 and sum(sizes) >= 96, sizes


@pytest.mark.parametrize("how", ["stop", "failure"])
def test_a_batch_planned_but_not_committed_is_read_again_with_the_same_events(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path, how: str
) -> None:
    """The query ends inside micro-batch 1, after Spark logged its offsets, before its commit.

    ``stop``: batch 1's ``foreachBatch`` callback runs a Spark job whose task
    waits (bounded) for a file nobody creates; ``query.stop()`` cancels the
    query's jobs, so the batch fails and is not committed. (Blocking the
    callback itself does not do: ``stop()`` waits for it, since it runs in
    this process, and whether the commit after it then fails varied from run
    to run.) ``failure``: the callback raises. Either way batch 1's offsets
    are in the checkpoint's ``offsets`` log and not in ``commits``; the
    restarted query runs batch 1 again over the same range, so with the same
    events, then goes on: every event once.
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    written = write_rounds(store, stream, range(3))  # 36 events, 10 per batch
    checkpoint = tmp_path / "checkpoint"
    marker = str(tmp_path / "release")
    blocking = threading.Event()

    def wait_for_marker(_: Any) -> Any:  # runs in a Spark task, which stop() cancels
        import os
        import time

        deadline = time.monotonic() + 60
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        return iter([])

    def end_inside_batch_one(batch_id: int) -> None:
        if batch_id != 1:
            return
        if how == "failure":
            msg = "test failure in the first attempt of micro-batch 1"
            raise RuntimeError(msg)
        blocking.set()
        spark.sparkContext.parallelize([0], 1).mapPartitions(wait_for_marker).count()

    log = BatchLog(after_first=end_inside_batch_one)

    def start() -> Any:
        events = source(spark, store, stream, maxEventsPerTrigger="10").where("kind = 'event'")
        return (
            events.writeStream.foreachBatch(log)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )

    query = start()
    try:
        if how == "stop":
            assert blocking.wait(60), "batch 1 never ran"
            query.stop()
        else:
            with pytest.raises(StreamingQueryException, match="first attempt of micro-batch 1"):
                query.awaitTermination(60)
    finally:
        pathlib.Path(marker).touch()  # no task may outlive the test
    assert (checkpoint / "offsets" / "1").exists()
    assert not (checkpoint / "commits" / "1").exists()
    written += write_rounds(store, stream, range(3, 5))

    query = start()
    settle(query)
    query.stop()
    attempts = [rows for batch, rows in log.attempts if batch == 1]
    assert len(attempts) == 2
    assert len(attempts[1]) == 10
    assert [key_seq(r) for r in attempts[0]] == [key_seq(r) for r in attempts[1]]
    assert Counter(key_seq(r) for r in log.rows()) == Counter(written)


# --- scaling during the query -------------------------------------------------


@pytest.mark.storages("file", "jetstream")
def test_splits_and_merges_during_the_query_lose_nothing_and_keep_each_key_in_order(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """Segment 0 splits, one successor merges with segment 1, the merged one splits again.

    Per routing key, every seq number of a micro-batch is above those of
    every earlier batch (and a batch, one task per lineage chain, holds a
    key's events in order). In the ingestion-time domain, no event comes
    after a batch whose watermark is at or above its ingestion time.
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    scope, name = stream.split("/")
    manager = StreamManager(store.client)
    log = BatchLog()
    df = source(spark, store, stream, timeDomain="IngestionTime", maxEventsPerTrigger="9")
    query = (
        df.writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        written = write_rounds(store, stream, range(3))
        store.advance(50)
        settle(query)
        written += write_rounds(store, stream, range(3, 6))
        manager.split_segment(scope, name, 0)  # 2 [0, .25) and 3 [.25, .5), while it reads
        written += write_rounds(store, stream, range(6, 9))
        store.advance(50)
        manager.merge_segments(scope, name, [3, 1])  # 4 [.25, 1)
        written += write_rounds(store, stream, range(9, 12))
        settle(query)
        store.advance(50)
        manager.split_segment(scope, name, 4)  # 5 and 6
        written += write_rounds(store, stream, range(12, 15))
        store.advance(50)
        settle(query)
    finally:
        query.stop()

    rows = event_rows(log.rows())
    assert Counter(key_seq(r) for r in rows) == Counter(written)  # nothing lost, nothing twice
    assert {r["segment"].rsplit("/", 1)[1] for r in rows} == {"0", "1", "2", "3", "4", "5", "6"}
    by_batch: dict[int, list[dict[str, Any]]] = {
        batch: event_rows(batch_rows) for batch, batch_rows in log.batches.items()
    }
    assert max(len(b) for b in by_batch.values()) == 9
    seen_up_to: dict[str, int] = {}
    for batch in sorted(by_batch):
        per_key: dict[str, list[int]] = defaultdict(list)
        for row in by_batch[batch]:
            key, seq = key_seq(row)
            per_key[key].append(seq)
        for key, seqs in per_key.items():
            assert seqs == sorted(seqs), f"batch {batch}: key {key} out of order: {seqs}"
            assert seqs[0] > seen_up_to.get(key, -1), f"batch {batch}: key {key} went back"
            seen_up_to[key] = seqs[-1]
    # The connector's promise: an event comes after no batch whose watermark reached its time.
    marks: list[Any] = []
    for batch in sorted(log.batches):
        for row in event_rows(log.batches[batch]):
            assert not marks or row["ingestion_time"] > max(marks), (batch, row, max(marks))
        marks += [r["watermark"] for r in log.batches[batch]]
    assert len(set(marks)) > 5  # the watermark moved many times


# --- per-trigger limits -------------------------------------------------------


def frame_size(store: SyntheticStore, stream: str) -> int:
    """The size of the stream's events, all equally long here."""
    sizes = set()
    for segment in store.segments(stream):
        result = store.client.read(segment.segment, 0)
        sizes |= {f.end - f.offset for f in iter_frames(result.data, result.offset)}
    assert len(sizes) == 1, sizes
    return sizes.pop()


@pytest.mark.parametrize("limit", ["maxEventsPerTrigger", "maxBytesPerTrigger"])
def test_trigger_limits_bound_every_batch_and_lose_nothing(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path, limit: str
) -> None:
    """At most 5 events (or 5 events' bytes) per micro-batch, watermark rows aside.

    The stream grows while the query runs; ``numInputRows`` counts the
    connector's watermark row too, so a batch reads at most 6 rows.
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    keys = KEYS[:8]
    written = write_rounds(store, stream, range(4), keys)
    size = frame_size(store, stream)
    value = "5" if limit == "maxEventsPerTrigger" else str(5 * size + size // 2)
    df = source(spark, store, stream, timeDomain="IngestionTime", **{limit: value})
    log = BatchLog()
    query = (
        df.writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
        store.advance(10)
        written += write_rounds(store, stream, range(4, 7), keys)
        settle(query)
    finally:
        query.stop()
    counts = [len(event_rows(rows)) for rows in log.batches.values()]
    assert max(counts) == 5 and sum(counts) == 56, counts
    assert len([c for c in counts if c]) >= 12
    assert max(p["numInputRows"] for p in query.recentProgress) <= 6
    assert Counter(key_seq(r) for r in event_rows(log.rows())) == Counter(written)


@pytest.mark.parametrize("limit", ["maxEventsPerTrigger", "maxBytesPerTrigger"])
def test_trigger_limits_do_not_freeze_event_time_once_writers_stop(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path, limit: str
) -> None:
    """With a trigger limit, the store's idle ticks still move Spark's event time.

    The writers stop and the clock passes every event; the store then ticks
    its idle segments, which raises their watermarks without a byte written.
    ``order_by_event_time`` must release the last readings, as it does
    without a limit: a plan that advanced a segment's watermark only when it
    read events from it planned no more batches, and they stayed held.
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    keys = KEYS[:4]
    written = write_rounds(store, stream, range(3), keys)
    size = frame_size(store, stream)
    value = "5" if limit == "maxEventsPerTrigger" else str(5 * size + size // 2)
    readings = source(
        spark,
        store,
        stream,
        timeDomain="IngestionTime",
        maxEventTimeLag="500 milliseconds",
        **{limit: value},
    )
    log = BatchLog()
    query = (
        order_by_event_time(with_connector_watermark(readings))
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
        assert log.rows() == []  # every reading is held: none is due yet
        store.advance(1_000)  # writers stopped; idle ticks pass every event by 500 ms
        settle(query)
    finally:
        query.stop()
    released = log.rows()
    assert sorted(key_seq(r) for r in released) == sorted(written)
    assert not any(r["late"] for r in released)


# --- bounded batch reads ------------------------------------------------------


def test_a_batch_read_between_two_cuts_returns_exactly_the_events_between_them(
    spark: Any, synthetic_store: SyntheticStore
) -> None:
    """``spark.read`` from one stream cut to another, across a split in between."""
    store = synthetic_store
    stream = store.create_stream(segments=2)
    scope, name = stream.split("/")
    before = write_rounds(store, stream, range(3))
    cut1 = store.cut(stream)
    between = write_rounds(store, stream, range(3, 6))
    StreamManager(store.client).split_segment(scope, name, 0)
    between += write_rounds(store, stream, range(6, 9))
    cut2 = store.cut(stream)
    after = write_rounds(store, stream, range(9, 12))
    assert set(cut1) == {f"{stream}/0", f"{stream}/1"}
    assert set(cut2) == {f"{stream}/1", f"{stream}/2", f"{stream}/3"}

    def read(**cuts: dict[str, int] | str) -> list[dict[str, Any]]:
        options = {k: v if isinstance(v, str) else json.dumps(v) for k, v in cuts.items()}
        return [
            r.asDict()
            for r in spark.read.format("tidemark")
            .option("uri", store.uri)
            .option("stream", stream)
            .options(**options)
            .load()
            .collect()
        ]

    for rows, expected in [
        (read(startingStreamCut=cut1, endingStreamCut=cut2), between),
        (read(endingStreamCut=cut1), before),
        (read(startingStreamCut=cut2), after),
        (read(), before + between + after),
    ]:
        assert Counter(key_seq(r) for r in rows) == Counter(expected)
        assert all(r["kind"] == "event" for r in rows)
        per_key: dict[str, list[int]] = defaultdict(list)
        for row in rows:
            key, seq = key_seq(row)
            per_key[key].append(seq)
        assert all(seqs == sorted(seqs) for seqs in per_key.values()), per_key


def test_a_sealed_stream_read_to_its_end_gives_the_end_of_time_as_spark_can_hold_it(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """Once every segment is sealed and read, the watermark is the end of time.

    The core's END_OF_TIME (2**63 - 1 ms) overflows a Spark timestamp
    (microseconds): the watermark row carries Spark's latest timestamp
    instead (9999-12-31T23:59:59.999Z), so every window closes and the query
    goes on, rather than failing with "Python int too large to convert".
    """
    store = synthetic_store
    stream = store.create_stream(segments=2)
    written = write_rounds(store, stream, range(2), KEYS[:4])
    store.client.seal_stream(*stream.split("/"))
    log = BatchLog()
    query = (
        source(spark, store, stream, timeDomain="IngestionTime")
        .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
        .foreachBatch(log)
        .start()
    )
    try:
        settle(query)
        assert query.exception() is None
    finally:
        query.stop()
    rows = log.rows()
    assert sorted(key_seq(r) for r in event_rows(rows)) == sorted(written)
    marks = [r["watermark"] for r in rows if r["kind"] == "watermark"]
    assert marks and max(marks).year == 9999


def test_min_partitions_cuts_a_one_segment_batch_into_tasks_reading_every_event_once(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    """A batch of one segment's 2.6 MB is read by 2 tasks; every event once, in order."""
    store = synthetic_store
    stream = store.create_stream(segments=1)
    with store.writer(stream) as writer:
        for seq in range(8_000):
            writer.write_event({"key": "k0", "seq": seq, "pad": "x" * 300}, routing_key="k0")
    batches: list[tuple[int, list[int]]] = []

    def record(frame: Any, _batch_id: int) -> None:
        seqs = [json.loads(row.event)["seq"] for row in frame.collect()]
        batches.append((frame.rdd.getNumPartitions(), seqs))

    read_to_end(source(spark, store, stream, minPartitions="2"), record, tmp_path / "checkpoint")
    assert [(partitions, len(seqs)) for partitions, seqs in batches] == [(2, 8_000)]
    assert batches[0][1] == list(range(8_000))
