"""The ``tidemark`` sink against a real store server: what lands, and nothing twice on retries.

Retries are real Spark retries (the session is ``local[2,2]``): the test-only
format ``tidemark_flaky`` (:mod:`tests.spark.flaky_sink`) is the real sink
whose first task attempt writes some rows durably, then raises. Streaming
input comes from :mod:`tests.spark.scripted_source`.
"""

from __future__ import annotations

import pathlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import StreamingQueryException

from connector.client import StoreClient, key_position

from .scripted_source import script

pytestmark = [pytest.mark.slow, pytest.mark.long]

Stored = dict[str, list[tuple[str | None, bytes]]]


def rows(count: int, keys: int = 3) -> list[tuple[str, str]]:
    """``count`` events over ``keys`` keys; the event text says its key and its rank in the key."""
    return [(f"k{i % keys}", f"k{i % keys}-{i // keys:04d}") for i in range(count)]


def flat(stored: Stored) -> list[tuple[str | None, str]]:
    return [(key, payload.decode()) for events in stored.values() for key, payload in events]


def assert_each_key_in_order(stored: Stored) -> None:
    for events in stored.values():
        by_key: dict[str | None, list[str]] = {}
        for key, payload in events:
            by_key.setdefault(key, []).append(payload.decode())
        for key, texts in by_key.items():
            assert texts == sorted(texts), f"key {key!r} out of order: {texts}"


def batch_df(spark: Any, data: list[tuple[str, str]]) -> Any:
    """``data`` as a DataFrame in which each key's rows are in one partition, in order.

    The sink keeps the order of a partition; a key spread over partitions has
    no order between them. Sorting also makes each partition's order the same
    on a retry, which the writer's replay needs.
    """
    df = spark.createDataFrame(data, "routing_key string, event string")
    return df.repartition(2, "routing_key").sortWithinPartitions("event")


def test_a_batch_write_appends_every_row_once_in_key_order(
    spark: Any, store_uri: str, new_stream: Callable[..., str], stored_events: Callable[..., Stored]
) -> None:
    stream = new_stream(segments=2)
    data = rows(300)
    batch_df(spark, data).write.format("tidemark").option("uri", store_uri).option(
        "stream", stream
    ).mode("append").save()
    stored = stored_events(store_uri, stream)
    assert sorted(flat(stored)) == sorted(data)
    assert all(stored.values()), "both segments should hold events"
    assert_each_key_in_order(stored)


def test_a_batch_write_takes_binary_events_named_columns_and_null_keys(
    spark: Any, store_uri: str, new_stream: Callable[..., str], stored_events: Callable[..., Stored]
) -> None:
    stream = new_stream(segments=2)
    df = spark.createDataFrame(
        [("a", bytearray(b"\x00\x01"), 1), (None, bytearray(b"\xff"), 2)],
        "who string, body binary, n int",
    )
    (
        df.write.format("tidemark")
        .option("uri", store_uri)
        .option("stream", stream)
        .option("routingKeyColumn", "who")
        .option("eventColumn", "body")
        .mode("append")
        .save()
    )
    stored = stored_events(store_uri, stream)
    assert flat_bytes(stored) == [("a", b"\x00\x01"), (None, b"\xff")]
    # A null key is stored as none, in the segment owning the empty key (the same on every replay).
    scope, name = stream.split("/")
    with StoreClient(store_uri) as client:
        owner = next(
            s for s in client.describe_stream(scope, name).segments if s.owns(key_position(""))
        )
    assert (None, b"\xff") in stored[owner.segment]


def flat_bytes(stored: Stored) -> list[tuple[str | None, bytes]]:
    return sorted((e for events in stored.values() for e in events), key=lambda e: e[1])


@pytest.mark.parametrize(
    ("options", "mode", "expected"),
    [
        ({"eventColumn": "payload"}, "append", "option 'eventColumn' names column 'payload'"),
        ({"routingKeyColumn": "n"}, "append", "column 'n' is int, expected string"),
        ({"eventColumn": "n"}, "append", "column 'n' is int, expected string or binary"),
        ({"stream": "a/b,c/d"}, "append", "option 'stream' must name one stream"),
        ({"startingStreamCut": "earliest"}, "append", "unknown option 'startingstreamcut'"),
        ({"topic": "t"}, "append", "that is Kafka's 'topic'; here it is 'stream'"),
        ({}, "overwrite", "only appends"),
    ],
)
def test_an_invalid_write_fails_before_any_task_writes(
    spark: Any,
    store_uri: str,
    new_stream: Callable[..., str],
    stored_events: Callable[..., Stored],
    options: dict[str, str],
    mode: str,
    expected: str,
) -> None:
    stream = new_stream()
    df = spark.createDataFrame([("k", "e", 1)], "routing_key string, event string, n int")
    settings = {"uri": store_uri, "stream": stream, **options}
    with pytest.raises(PySparkException) as error:
        df.write.format("tidemark").options(**settings).mode(mode).save()
    assert expected in str(error.value)
    assert flat(stored_events(store_uri, stream)) == []


@pytest.mark.storages("file", "jetstream")
def test_a_retried_task_appends_nothing_twice(
    spark: Any,
    store_uri: str,
    new_stream: Callable[..., str],
    stored_events: Callable[..., Stored],
    tmp_path: pathlib.Path,
) -> None:
    stream = new_stream(segments=2)
    data = rows(400)
    (
        batch_df(spark, data)
        .write.format("tidemark_flaky")
        .option("uri", store_uri)
        .option("stream", stream)
        .option("failAfter", "150")
        .option("markerDir", str(tmp_path))
        .mode("append")
        .save()
    )
    failures = sorted(p.name for p in tmp_path.iterdir())
    assert len(failures) == 2 and all("-attempt0-" in name for name in failures), failures
    stored = stored_events(store_uri, stream)
    assert Counter(flat(stored)) == Counter(data)  # every row exactly once
    assert_each_key_in_order(stored)


def test_running_a_write_again_with_the_same_write_id_appends_nothing_twice(
    spark: Any, store_uri: str, new_stream: Callable[..., str], stored_events: Callable[..., Stored]
) -> None:
    stream = new_stream()
    df = batch_df(spark, rows(50))
    for write_id in ("nightly-1", "nightly-1", None):
        writer = df.write.format("tidemark").option("uri", store_uri).option("stream", stream)
        (writer.option("writeId", write_id) if write_id else writer).mode("append").save()
    # The second run with the same writeId added nothing; a run without one is a new write.
    assert Counter(Counter(flat(stored_events(store_uri, stream))).values()) == {2: 50}


def stream_to_tidemark(
    spark: Any, fmt: str, batches: list[Any], checkpoint: pathlib.Path, **options: str
) -> Any:
    source = spark.readStream.format("tidemark_scripted").option("script", script(*batches)).load()
    events = source.where("kind = 'event'").select("routing_key", "event")
    return (
        events.writeStream.format(fmt)
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )


def scripted_batches(batch_count: int, per_batch: int) -> tuple[list[Any], list[tuple[str, str]]]:
    data = rows(batch_count * per_batch)
    chunks = [data[i * per_batch : (i + 1) * per_batch] for i in range(batch_count)]
    return [(None, [(k, e, None) for k, e in chunk]) for chunk in chunks], data


def test_a_streaming_write_appends_each_micro_batch_once_despite_a_task_failure(
    spark: Any,
    store_uri: str,
    new_stream: Callable[..., str],
    stored_events: Callable[..., Stored],
    tmp_path: pathlib.Path,
) -> None:
    stream = new_stream(segments=2)
    batches, data = scripted_batches(batch_count=3, per_batch=60)
    markers = tmp_path / "markers"
    markers.mkdir()
    query = stream_to_tidemark(
        spark,
        "tidemark_flaky",
        batches,
        tmp_path / "checkpoint",
        uri=store_uri,
        stream=stream,
        failAfter="25",
        markerDir=str(markers),
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    # Every task's first attempt failed after 25 events; one writer per (query, batch, partition).
    failures = sorted(p.name for p in markers.iterdir())
    assert len(failures) == 3, failures
    assert all(name.startswith(f"spark-{query.id}-") for name in failures), failures
    stored = stored_events(store_uri, stream)
    assert Counter(flat(stored)) == Counter(data)
    assert_each_key_in_order(stored)


def test_a_micro_batch_run_again_after_the_query_failed_appends_nothing_twice(
    spark: Any,
    store_uri: str,
    new_stream: Callable[..., str],
    stored_events: Callable[..., Stored],
    tmp_path: pathlib.Path,
) -> None:
    stream = new_stream(segments=2)
    batches, data = scripted_batches(batch_count=2, per_batch=40)
    markers = tmp_path / "markers"
    markers.mkdir()
    checkpoint = tmp_path / "checkpoint"
    options = {"uri": store_uri, "stream": stream, "markerDir": str(markers), "failAfter": "15"}
    # Every attempt of batch 0 writes 15 events and fails: the batch, then the query, fail.
    failing = stream_to_tidemark(
        spark, "tidemark_flaky", batches, checkpoint, failOn="every-attempt", **options
    )
    with pytest.raises(StreamingQueryException, match="simulated task failure"):
        failing.awaitTermination(120)
    assert len(list(markers.iterdir())) == 2  # attempts 0 and 1 of batch 0's one task
    assert len(flat(stored_events(store_uri, stream))) == 15
    # The restarted query (same checkpoint, same query id) runs batch 0 again, then batch 1.
    restarted = stream_to_tidemark(
        spark, "tidemark_flaky", batches, checkpoint, failOn="never", **options
    )
    try:
        restarted.processAllAvailable()
    finally:
        restarted.stop()
    assert restarted.id == failing.id
    stored = stored_events(store_uri, stream)
    assert Counter(flat(stored)) == Counter(data)
    assert_each_key_in_order(stored)


def test_an_invalid_streaming_sink_fails_the_query_before_any_write(
    spark: Any,
    store_uri: str,
    new_stream: Callable[..., str],
    stored_events: Callable[..., Stored],
    tmp_path: pathlib.Path,
) -> None:
    stream = new_stream()
    batches, _ = scripted_batches(batch_count=1, per_batch=5)
    query = stream_to_tidemark(
        spark, "tidemark", batches, tmp_path, uri=store_uri, stream=stream, eventColumn="body"
    )
    with pytest.raises(StreamingQueryException, match="option 'eventColumn' names column 'body'"):
        query.awaitTermination(60)
    assert flat(stored_events(store_uri, stream)) == []


def test_what_the_sink_writes_the_source_reads_back(
    spark: Any, store_uri: str, new_stream: Callable[..., str]
) -> None:
    stream = new_stream(segments=2)
    data = rows(30)
    batch_df(spark, data).write.format("tidemark").option("uri", store_uri).option(
        "stream", stream
    ).mode("append").save()
    read = spark.read.format("tidemark").option("uri", store_uri).option("stream", stream).load()
    got = [(r["routing_key"], r["event"], r["kind"]) for r in read.collect()]
    assert sorted(got) == sorted((k, e, "event") for k, e in data)
