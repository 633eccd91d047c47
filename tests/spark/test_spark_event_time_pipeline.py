"""Queries chained through Tidemark streams in the event-time domain, each asserting its watermark.

Seed 004's failure case: job 1 counts each sensor's readings per 1 s window;
job 2 counts job 1's window results per 3 s window. The sensors assert their
own event time (C is slow); job 1 reads them in the event-time domain and
writes its results with ``assertWatermark``, so the stream between the jobs
carries job 1's output watermark, and job 2, reading it in the event-time
domain, finds none of job 1's results late, through a restart of each job.
A job 2 reading the same stream in the ingestion-time domain (without a
lag) finds them late: a window's result is written well after its end.
Against a real store server on a synthetic clock.
"""

from __future__ import annotations

import json
import pathlib
from collections import Counter
from typing import Any

import pytest

from connector import EventWriter, JsonSerializer
from connector.errors import InvalidArgumentError
from examples.sensors import write_asserting_round
from examples.spark_chained_pipeline import count_job, recount_job

from .conftest import BatchLog, SyntheticStore, settle, stored_events

pytestmark = [pytest.mark.slow, pytest.mark.long]

S = 1_000  # ms per second
#: Rounds of readings, one every 700 ms of the synthetic clock: C's readings trail
#: the clock by 4 s, so the watermark closes no window in the first two rounds and
#: about 1.5 windows a round after (a window of 1 s often gets two rounds' readings).
ROUNDS = 12
#: The jobs start once the rounds that close nothing are written (their first
#: micro-batches read those), job 1 restarts after round 5 (3 windows closed) and
#: job 2 after round 9 (10 closed); the 12 rounds close 16 windows.
START_AFTER, RESTART_ONE_AFTER, RESTART_TWO_AFTER = 1, 5, 9
#: The queries settle after every second round (rounds 3, 5, 7, 9 and 11, the
#: restarts' among them): each settle costs the three queries a few micro-batches
#: of their windows' state, and two rounds a batch close the same windows.
SETTLE_EVERY = 2


def job_one(spark: Any, store: SyntheticStore, readings: str, counts: str, folder: Any) -> Any:
    return count_job(spark, store.uri, readings, counts, str(folder))


def job_two(
    spark: Any, store: SyntheticStore, counts: str, domain: str, log: BatchLog, folder: Any
) -> Any:
    return recount_job(spark, store.uri, counts, str(folder), log, domain)


def test_a_job_chained_through_an_asserted_stream_finds_no_result_of_the_first_late(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = synthetic_store
    readings, counts = store.create_stream(segments=2), store.create_stream(segments=2)
    writers = {
        sensor: EventWriter(store.client, readings, JsonSerializer(), writer_id=f"sensor-{sensor}")
        for sensor in "ABC"
    }
    asserted, plain = BatchLog(), BatchLog()
    for seq in range(START_AFTER + 1):
        write_asserting_round(writers, seq, store.clock.now_ms)
        store.advance(700)
    one = job_one(spark, store, readings, counts, tmp_path / "one")
    two = job_two(spark, store, counts, "EventTime", asserted, tmp_path / "two")
    contrast = job_two(spark, store, counts, "IngestionTime", plain, tmp_path / "plain")
    try:
        for seq in range(START_AFTER + 1, ROUNDS):
            write_asserting_round(writers, seq, store.clock.now_ms)
            store.advance(700)
            if (seq - START_AFTER) % SETTLE_EVERY:
                continue
            settle(one, two, contrast)
            if seq == RESTART_ONE_AFTER:  # a restart of job 1, from its checkpoint
                one.stop()
                one = job_one(spark, store, readings, counts, tmp_path / "one")
            if seq == RESTART_TWO_AFTER:  # a restart of job 2
                two.stop()
                two = job_two(spark, store, counts, "EventTime", asserted, tmp_path / "two")
    finally:
        for query in (one, two, contrast):
            query.stop()

    results = [
        (key, json.loads(payload))
        for events in stored_events(store.uri, counts).values()
        for key, payload in events
    ]
    windows = Counter((sensor, r["start"]) for sensor, r in results)
    assert len(windows) >= 12, "job 1 closed windows as the sensors went on"
    assert set(windows.values()) == {1}, "each window's result once, through job 1's restart"
    rows = asserted.rows()
    assert rows, "job 2 closed windows on job 1's watermark"
    assert [r for r in rows if r["late"]] == [], "no result of job 1 is late in job 2"
    for row in rows:
        start = round(row["window_start"].timestamp() * S)
        end = round(row["window_end"].timestamp() * S)
        inside = [r for sensor, r in results if sensor == row["routing_key"]]
        assert row["count"] == sum(1 for r in inside if start <= r["ts"] < end), row
    assert any(r["late"] for r in plain.rows()), "without job 1's watermark its results are late"


def test_assert_watermark_needs_a_streaming_write_with_a_local_checkpoint(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = synthetic_store
    stream = store.create_stream()
    frame = spark.createDataFrame([("k", "{}")], "routing_key string, event string")
    with pytest.raises(Exception, match="assertWatermark' is for streaming writes"):
        frame.write.format("tidemark").mode("append").options(
            uri=store.uri, stream=stream, assertWatermark="true"
        ).save()
    with pytest.raises(InvalidArgumentError, match="not on a file system"):
        from spark_adapter.query_watermark import checkpoint_folder

        checkpoint_folder("s3a://bucket/checkpoint")
