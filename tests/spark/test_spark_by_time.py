"""Reads that start (and batch reads that end) at an ingestion time: ``startingTimestamp``.

Against a real store server on a synthetic clock, so each round of writes
has its own ingestion times: a read from a round's time gets that round and
the later ones, exactly; a batch read up to a time gets what came before it.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from pyspark.errors import PySparkException

from connector.clock import utc_text

from .conftest import BatchLog, SyntheticStore, read_to_end
from .test_spark_streaming import event_rows, key_seq, source, write_rounds

pytestmark = pytest.mark.slow

KEYS = ["k0", "k1", "k2", "k3"]


def three_rounds(
    store: SyntheticStore, stream: str
) -> tuple[list[int], list[list[tuple[str, int]]]]:
    """Rounds 0, 1 and 2, a second apart (and split in between); returns their times and events."""
    times, rounds = [], []
    for round_ in range(3):
        store.advance(1_000)
        times.append(store.clock.now_ms())
        rounds.append(write_rounds(store, stream, [round_ * 10 + n for n in range(3)], KEYS))
        if round_ == 0:
            scope, name = stream.split("/")
            store.client.scale_stream(scope, name, [0], split_count=2)
    return times, rounds


def test_a_streaming_read_from_a_time_reads_what_was_ingested_from_then_on(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = synthetic_store
    stream = store.create_stream(segments=2)
    times, rounds = three_rounds(store, stream)
    log = BatchLog()
    frame = source(spark, store, stream, startingTimestamp=utc_text(times[1]))
    read_to_end(frame, log, tmp_path / "checkpoint")
    assert sorted(key_seq(r) for r in event_rows(log.rows())) == sorted(rounds[1] + rounds[2])


def test_a_batch_read_between_two_times_reads_what_was_ingested_between_them(
    spark: Any, synthetic_store: SyntheticStore
) -> None:
    store = synthetic_store
    stream = store.create_stream(segments=2)
    times, rounds = three_rounds(store, stream)
    options = {"uri": store.uri, "stream": stream, "deserializer": "json"}
    between = spark.read.format("tidemark").options(
        **options, startingTimestamp=str(times[1]), endingTimestamp=str(times[2])
    )
    assert sorted(key_seq(r.asDict()) for r in between.load().collect()) == sorted(rounds[1])
    before = spark.read.format("tidemark").options(**options, endingTimestamp=str(times[1]))
    assert sorted(key_seq(r.asDict()) for r in before.load().collect()) == sorted(rounds[0])


def test_a_time_and_a_cut_for_the_same_end_are_refused_at_load_naming_both(
    spark: Any, synthetic_store: SyntheticStore
) -> None:
    stream = synthetic_store.create_stream()
    with pytest.raises(PySparkException, match="'startingStreamCut' .* and 'startingTimestamp'"):
        spark.read.format("tidemark").options(
            uri=synthetic_store.uri,
            stream=stream,
            startingStreamCut="latest",
            startingTimestamp="2025-11-14T22:13:20Z",
        ).load()
