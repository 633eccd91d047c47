"""The default start of a ``tidemark`` read on a truncated stream: its first readable data."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.truncation import truncated_stream

from .conftest import BatchLog, SyntheticStore

pytestmark = pytest.mark.slow


def test_the_default_start_reads_from_the_first_readable_offset_after_a_truncation(
    spark: Any, synthetic_store: SyntheticStore
) -> None:
    scope = f"s{uuid.uuid4().hex[:12]}"
    kept = truncated_stream(synthetic_store.client, scope)
    options = {"uri": synthetic_store.uri, "stream": f"{scope}/s", "deserializer": "json"}
    log = BatchLog()
    query = (
        spark.readStream.format("tidemark")
        .options(**options)
        .load()
        .writeStream.foreachBatch(log)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the AvailableNow query did not end"
    streamed = [json.loads(r["event"]) for r in log.rows() if r["kind"] == "event"]
    assert sorted(streamed, key=lambda e: e["n"]) == kept
    batch = spark.read.format("tidemark").options(**options).load().collect()
    assert sorted((json.loads(r["event"]) for r in batch), key=lambda e: e["n"]) == kept
