"""Idle ticks make micro-batches only when Spark has a use for them (:mod:`spark_adapter.batching`).

Counted, not timed: micro-batches of a real Spark session over a real
server whose clock moves only when a test says (tick rounds of a synthetic
clock); the driver's source made by hand where a test looks at what it
reports. Data never waits for the rule: an event is a micro-batch at once.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from connector.groups.record import GroupRecord, state_key
from connector.groups.state import GroupState, group_watermark
from connector.reader.source import Frontier
from spark_adapter.batching import makes_a_batch
from spark_adapter.options import (
    for_stream,
    idle_wait_ms,
    idle_watermark_step_ms,
    read_spec,
    reader_group,
)
from spark_adapter.reading import TidemarkStreamReader
from spark_adapter.schema import tidemark_schema
from tests.probes import CallCounter

from .conftest import BatchLog, SyntheticStore, settle

pytestmark = pytest.mark.slow

ROUNDS = 4
TICK_MS = 1_000


def settled(query: Any) -> None:
    """:func:`settle` twice: the second by triggers that all began after what the test did.

    (``processAllAvailable`` returns at the first trigger that found
    nothing, which may have looked just before the test's change.)
    """
    settle(query, query)


def frontier(offsets: dict[str, int], watermarks: dict[str, int], spark: int | None) -> Frontier:
    """A frontier at ``offsets`` with segment ``watermarks``, Spark's watermark ``spark``."""
    return Frontier(GroupState.starting_at(offsets, watermarks), {}, spark)


def test_only_a_move_of_what_is_read_or_a_watermark_step_makes_a_batch() -> None:
    begin = frontier({"s/t/0": 10, "s/t/1": 5}, {"s/t/0": 100, "s/t/1": 90}, 80)
    ticked = frontier({"s/t/0": 10, "s/t/1": 5}, {"s/t/0": 900, "s/t/1": 95}, 85)
    assert not makes_a_batch(begin, begin)
    assert makes_a_batch(begin, ticked)  # any rise, by default
    assert not makes_a_batch(begin, ticked, watermark_step_ms=10)
    assert makes_a_batch(begin, ticked, watermark_step_ms=5)
    stood = frontier({"s/t/0": 10, "s/t/1": 5}, {"s/t/0": 900, "s/t/1": 90}, 80)
    assert not makes_a_batch(begin, stood)  # only a segment above the least moved
    event = frontier({"s/t/0": 11, "s/t/1": 5}, {"s/t/0": 100, "s/t/1": 90}, 80)
    assert makes_a_batch(begin, event, watermark_step_ms=10**9)  # data never waits
    plain = frontier({"s/t/0": 10, "s/t/1": 5}, {"s/t/0": 100, "s/t/1": 90}, None)
    plain_ticked = frontier({"s/t/0": 10, "s/t/1": 5}, {"s/t/0": 900, "s/t/1": 95}, None)
    assert not makes_a_batch(plain, plain_ticked)  # processing time: no watermark for Spark
    assert makes_a_batch(plain, ticked)  # a first watermark
    sealed = Frontier(GroupState.starting_at({"s/t/0": 10}, {"s/t/0": 100}), {"s/t/1": 5}, 80)
    assert makes_a_batch(begin, sealed)


@pytest.mark.parametrize(
    ("options", "batches"),
    [
        ({}, 0),  # processing time: the ticks move no watermark Spark has
        # each round raises Spark's watermark by a second: a batch every second round
        ({"timeDomain": "IngestionTime", "idleWatermarkStep": "2 seconds"}, ROUNDS // 2),
    ],
)
def test_idle_tick_rounds_make_micro_batches_only_for_a_watermark_spark_uses(
    spark: Any,
    synthetic_store: SyntheticStore,
    tmp_path: pathlib.Path,
    options: dict[str, str],
    batches: int,
) -> None:
    store = synthetic_store
    stream = store.create_stream(segments=4)
    log = BatchLog()
    query = (
        spark.readStream.format("tidemark")
        .options(uri=store.uri, stream=stream, deserializer="json", **options)
        .load()
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settled(query)
        before = len(log.batches)
        for _ in range(ROUNDS):
            store.advance(TICK_MS)  # every segment ticked, nothing written
            settled(query)
        assert len(log.batches) - before == batches

        ran = len(log.batches)
        with store.writer(stream) as writer:
            writer.write_event({"n": 1}, routing_key="k")
        settled(query)  # the event, without a tick: at once, whatever the step
        assert len(log.batches) == ran + 1
        [last] = [rows for batch, rows in log.batches.items() if batch == max(log.batches)]
        assert [json.loads(r["event"]) for r in last if r["kind"] == "event"] == [{"n": 1}]
    finally:
        query.stop()


def _driver(store: SyntheticStore, stream: str, **options: str) -> TidemarkStreamReader:
    """The query's source as Spark's driver makes it."""
    settings = {"uri": store.uri, "stream": stream, **options}
    spec = for_stream(read_spec(settings))
    return TidemarkStreamReader(
        spec,
        tidemark_schema(spec.deserializer),
        reader_group(settings),
        idle_wait_ms=idle_wait_ms(settings),
        idle_watermark_step_ms=idle_watermark_step_ms(settings),
    )


def test_a_plan_held_back_counts_for_the_figures_and_the_position_published_once(
    synthetic_store: SyntheticStore,
) -> None:
    """Processing time: Spark's offset stays, its figures and the group's watermark follow ticks."""
    store = synthetic_store
    stream = store.create_stream(segments=3)
    reader = _driver(store, stream, readerGroup="held", idleWait="0 seconds")
    try:
        limit = reader.getDefaultReadLimit()
        start = reader.latestOffset(reader.initialOffset(), limit)
        for _ in range(3):
            store.advance(TICK_MS)
            assert reader.latestOffset(start, limit) == start  # no batch for Spark
            reported = reader.reportLatestOffset()
            ticked = store.group_watermark(stream)
            assert reported["progress"]["processingTimeWatermark"] == ticked
        reader.latestOffset(start, limit)  # publishes where the query is
        scope = stream.split("/")[0]
        published = store.client.get_state(state_key(scope, "held")).value
        assert group_watermark(GroupRecord.from_json(published).state) == ticked

        counted = CallCounter(store.server)
        for _ in range(3):  # idle triggers: the position published is not looked at again
            assert reader.latestOffset(start, limit) == start
        assert counted.since() == {"all": 3, "DescribeTails": 3}
    finally:
        reader.stop()


def test_the_reported_latest_offset_says_how_long_its_trigger_waited(
    synthetic_store: SyntheticStore,
) -> None:
    """``idleWaitMs``: 0 when the trigger could not wait, the wait's length when it waited."""
    store = synthetic_store
    stream = store.create_stream(segments=2)
    reader = _driver(store, stream, idleWait="300 milliseconds")
    try:
        limit = reader.getDefaultReadLimit()
        start = reader.latestOffset(reader.initialOffset(), limit)
        assert reader.reportLatestOffset()["idleWaitMs"] == 0  # a first trigger never waits
        assert reader.latestOffset(start, limit) == start  # nothing changes: it waits it out
        assert reader.reportLatestOffset()["idleWaitMs"] >= 300
    finally:
        reader.stop()
