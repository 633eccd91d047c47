"""How far behind a query is, as Spark's progress shows it and as the store's metrics do.

Spark 4.3 gives a Python source no custom metrics, so the source's offsets
say it: each leads with ``streams``, per stream the unread events and the
processing-time delay of the query's planned position, and ``progress``,
the query's figures. With ``readerGroup`` the query's committed position is
a reader group in the store too, whose metrics
(``tidemark_reader_group_unread_events``...) count by the same rule, also
while the query is down. Against a real store
server with a metrics port, on a synthetic clock.
"""

from __future__ import annotations

import json
import pathlib
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from connector.server import StoreServer
from tests.ops.metric_rules import naming_violations
from tests.probes import scrape

from .conftest import BatchLog, SyntheticStore, settle
from .test_spark_streaming import KEYS, event_rows, source, write_rounds

pytestmark = pytest.mark.slow


@pytest.fixture
def watched_store(storage_config: Callable[..., Any], clock: Any) -> Iterator[SyntheticStore]:
    """A :class:`SyntheticStore` whose server serves metrics."""
    config = storage_config(max_watermark_lag_ms=0)
    server = StoreServer(config, listen="127.0.0.1:0", metrics_listen="127.0.0.1:0").start()
    store = SyntheticStore(server, clock)
    yield store
    store.close()
    server.stop(grace_s=0.5)


def test_offsets_and_the_reader_groups_metrics_say_how_far_behind_the_query_is(
    spark: Any, watched_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = watched_store
    stream = store.create_stream(segments=2)
    for seq in range(5):  # 4 events a round, 100 ms apart: 20 events, at most 5 a batch
        write_rounds(store, stream, [seq], KEYS[:4])
        store.advance(100)
    checkpoint = tmp_path / "checkpoint"
    log = BatchLog()
    query = (
        source(spark, store, stream, maxEventsPerTrigger="5", readerGroup="dashboard")
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        settle(query)
    finally:
        query.stop()
    assert len(event_rows(log.rows())) == 20
    progress = [p["sources"][0] for p in query.recentProgress if p["numInputRows"]]
    ends = [json.loads(p["endOffset"]) for p in progress]
    behind = [end["streams"][stream] for end in ends]
    keys = ["streams", "progress", "readerGroup", "ends", "state", "watermark"]
    assert list(ends[0]) == keys  # readable first
    assert [b["unreadEvents"] for b in behind] == [15, 10, 5, 0]
    assert [end["progress"]["unreadEvents"] for end in ends] == [15, 10, 5, 0]
    waits = [b["processingTimeDelayMs"] for b in behind]
    assert waits == sorted(waits, reverse=True) and waits[0] > waits[-1]
    latest = [json.loads(p["latestOffset"])["streams"][stream] for p in progress]
    assert latest == behind  # nothing was written meanwhile: the same figures

    # The query is down; events come. The store's metrics show its group falling behind.
    write_rounds(store, stream, [5, 6], KEYS[:4])
    store.advance(100)
    assert store.server.metrics_address is not None
    with urllib.request.urlopen(f"http://{store.server.metrics_address}/metrics") as answer:
        assert naming_violations(answer.read().decode()) == []
    samples = scrape(store.server.metrics_address)
    group = (("group", f"{stream.split('/')[0]}/dashboard"),)
    assert samples[("tidemark_reader_group_unread_events", group)] == 8
    delay = "tidemark_reader_group_processing_time_watermark_delay_seconds"
    assert samples[(delay, group)] > 0

    # Restarted, its first batch's offsets count the same 8 events (then fewer).
    restarted = (
        source(spark, store, stream, maxEventsPerTrigger="5", readerGroup="dashboard")
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        settle(restarted)
    finally:
        restarted.stop()
    first = next(p["sources"][0] for p in restarted.recentProgress if p["numInputRows"])
    assert json.loads(first["startOffset"])["streams"][stream]["unreadEvents"] == 0
    assert json.loads(first["endOffset"])["streams"][stream]["unreadEvents"] == 3
    unread = scrape(store.server.metrics_address)[("tidemark_reader_group_unread_events", group)]
    assert unread == 0
