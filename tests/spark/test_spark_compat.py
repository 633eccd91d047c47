"""A query restarted from a checkpoint that an earlier version of the source wrote.

``data/checkpoint_9325655/`` holds a store's data dir and a streaming query's
checkpoint, both written by the code of commit 9325655 with
``data/make_checkpoint.py`` (its docstring says how; the tests do not run
it): a stream of 2 segments whose segment 0 was split, 12 events the query
read before it stopped, 6 it never saw. Today's source, restarted from that
checkpoint over that data, must read each of the 6 once and none of the 12.
"""

from __future__ import annotations

import json
import pathlib
import shutil
from collections import Counter
from typing import Any

import pytest

from .conftest import BatchLog, settle

pytestmark = pytest.mark.slow

FIXTURE = pathlib.Path(__file__).parent / "data" / "checkpoint_9325655"


def test_a_query_restarted_from_an_earlier_versions_checkpoint_reads_each_new_event_once(
    spark: Any, start_store: Any, tmp_path: pathlib.Path
) -> None:
    shutil.copytree(FIXTURE / "store", tmp_path / "store")
    shutil.copytree(FIXTURE / "checkpoint", tmp_path / "checkpoint")
    written = json.loads((FIXTURE / "written.json").read_text())
    last_offset = (FIXTURE / "checkpoint" / "offsets" / "2").read_text().splitlines()[-1]
    checkpointed_watermark = json.loads(last_offset)["watermark"]
    server = start_store(data_dir=str(tmp_path / "store"), max_watermark_lag_ms=0)

    log = BatchLog()
    query = (
        spark.readStream.format("tidemark")
        .option("uri", server.uri)
        .option("stream", "compat/events")
        .option("deserializer", "json")
        .option("timeDomain", "IngestionTime")
        .option("maxEventTimeLag", "100 milliseconds")
        .option("timestampField", "ts")
        .option("maxEventsPerTrigger", "4")
        .load()
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
    finally:
        query.stop()

    assert min(log.batches) == 3, "the restarted query goes on after the checkpoint's 3 batches"
    events = [json.loads(r["event"]) for r in log.rows() if r["kind"] == "event"]
    assert Counter(map(_key_seq, events)) == Counter(map(_key_seq, written["unread"]))
    watermarks = [r["watermark"] for r in log.rows() if r["watermark"] is not None]
    assert watermarks and all(w.timestamp() * 1000 >= checkpointed_watermark for w in watermarks), (
        "the watermark never steps back below the checkpoint's"
    )


def _key_seq(event: dict[str, Any]) -> tuple[str, int]:
    return event["key"], event["seq"]
