"""A Spark query chained into a second stream is a stage: ``tidemarkctl pipeline`` draws it.

The sensors assert their event time; the query reads them in the event-time
domain with ``readerGroup``, counts per 1 s window and writes the counts to
a second stream with ``assertWatermark``. Its sink records the stage when it
commits; the pipeline shows the stage's input watermark (the group's event
time, as the store keeps the query's position), its output watermark (what
the query asserted) and the difference. Against a real store server on a
synthetic clock.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from click.testing import CliRunner

from connector import EventWriter, JsonSerializer
from connector.cli import cli
from connector.groups.record import GroupRecord, state_key
from connector.groups.state import group_event_time
from examples.sensors import join_asserting, write_asserting_round
from examples.spark_chained_pipeline import count_job

from .conftest import SyntheticStore, settle

pytestmark = pytest.mark.slow


def test_a_query_writing_with_assert_watermark_is_drawn_as_a_stage_with_its_watermarks(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = synthetic_store
    readings, counts = store.create_stream(segments=2), store.create_stream(segments=1)
    writers = {
        s: EventWriter(store.client, readings, JsonSerializer(), writer_id=f"sensor-{s}")
        for s in "ABC"
    }
    join_asserting(writers, store.clock.now_ms)
    query = count_job(
        spark, store.uri, readings, counts, str(tmp_path / "one"), reader_group="counter"
    )
    try:
        for seq in range(6):
            write_asserting_round(writers, seq, store.clock.now_ms)
            store.advance(700)
            settle(query)
        query_id = query.id
    finally:
        query.stop()

    scope = counts.split("/")[0]
    result = CliRunner().invoke(cli, ["pipeline", scope, "--json", "--uri", store.uri])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    [stage] = report["stages"]
    group = f"{readings.split('/')[0]}/counter"
    assert (stage["stage"], stage["engine"], stage["inputs"], stage["output"], stage["group"]) == (
        f"spark-{query_id}",
        "spark",
        [readings],
        counts,
        group,
    )
    stored = store.client.get_state(state_key(*group.split("/")))
    assert stage["input_from"] == "group"
    assert stage["input_watermark"] == group_event_time(GroupRecord.from_json(stored.value).state)
    [info] = [store.client.segment_info(s.segment) for s in store.segments(counts)]
    asserted = {w.writer_id: w.event_time for w in info.writers}
    assert stage["output_watermark"] == asserted[f"spark-{query_id}-watermark"]
    latency = stage["event_time_latency_ms"]
    assert latency == stage["input_watermark"] - stage["output_watermark"] >= 0
    text = CliRunner().invoke(cli, ["pipeline", scope, "--uri", store.uri]).stdout
    assert f"{readings} -> [spark-{query_id}] -> {counts}" in text
