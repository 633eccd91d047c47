"""A stream copied into another by two ``tidemark`` formats: ``readStream`` into ``writeStream``.

The source's rows go to the sink as they come, its watermark rows too (an
ingestion-time read carries one per batch whose watermark rose, with a null
event): the sink skips them, and every event lands once, each key's in order.
Against a real store server on a synthetic clock
(:class:`tests.spark.conftest.SyntheticStore`).
"""

from __future__ import annotations

import pathlib
from collections import Counter
from typing import Any

import pytest

from .conftest import SyntheticStore, settle, stored_events
from .test_spark_streaming import KEYS, write_rounds

pytestmark = pytest.mark.slow


def test_a_stream_copies_into_another_with_the_sources_watermark_rows(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = synthetic_store
    origin, copy = store.create_stream(segments=2), store.create_stream(segments=3)
    written = write_rounds(store, origin, range(10), KEYS[:4])
    store.advance(1_000)
    query = (
        spark.readStream.format("tidemark")
        .option("uri", store.uri)
        .option("stream", origin)
        .option("timeDomain", "IngestionTime")
        .option("maxEventTimeLag", "100 milliseconds")
        .load()
        .writeStream.format("tidemark")
        .option("uri", store.uri)
        .option("stream", copy)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
        written += write_rounds(store, origin, range(10, 20), KEYS[:4])
        store.advance(1_000)
        settle(query)
    finally:
        query.stop()
    assert query.exception() is None
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert rows > len(written), "the source sent watermark rows besides the events"
    copied = [
        (key, payload.decode())
        for events in stored_events(store.uri, copy).values()
        for key, payload in events
    ]
    expected = [(key, f'{{"key":"{key}","seq":{seq}}}') for key, seq in written]
    assert Counter(copied) == Counter(expected)  # every event once
    for key in KEYS[:4]:
        assert [e for k, e in copied if k == key] == [e for k, e in expected if k == key]
