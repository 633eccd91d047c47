"""``watermarkPercentile`` in a Spark query, on a real store server and a synthetic clock.

A straggler segment (ingestion time): one segment of ten holds 20 events a
minute older than the others' 180, read 10 events a micro-batch (the oldest
first). At 0.9 the watermark passes the straggler's rest once its first
batch is read, so the rest comes out late, counted, never dropped, and no
more of it than 1 - p of the events; at 1 the watermark waits and nothing
is late.

A straggler writer (event time): ten writers on one stream, one of which
asserts a minute behind the others: at 0.9 the query's watermark follows
the nine, so the straggler's next event comes out late (flagged in the
``late`` column, never dropped); at 1 the watermark waits for it and
nothing is late. The query's progress counts
what it read late (``observe_late``), the figure to check against ``1 - p``.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

import spark_adapter

from .conftest import BatchLog, SyntheticStore, read_to_end, settle

pytestmark = pytest.mark.slow


#: The read options of the straggler writer's test: event time from each event's ``t``.
EVENT_TIME = {"timeDomain": "EventTime", "timestampField": "t"}


def _read(spark: Any, store: SyntheticStore, stream: str, percentile: str, **options: str) -> Any:
    """``stream``'s JSON events at ``percentile``, with ``options`` (the time domain's)."""
    return (
        spark.readStream.format("tidemark")
        .options(uri=store.uri, stream=stream, deserializer="json", **options)
        .option("watermarkPercentile", percentile)
        .load()
    )


@pytest.mark.parametrize("percentile", ["0.9", "1"])
def test_a_straggler_writer_is_late_below_percentile_one(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path, percentile: str
) -> None:
    stream = synthetic_store.create_stream(1)
    writers = [synthetic_store.writer(stream) for _ in range(10)]
    for i, writer in enumerate(writers):
        writer.write_event({"t": 500 if i == 0 else 59_000})
        writer.flush()
        writer.note_time(1_000 if i == 0 else 60_000)
    log = BatchLog()
    query = (
        spark_adapter.observe_late(_read(spark, synthetic_store, stream, percentile, **EVENT_TIME))
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
        writers[0].write_event({"t": 1_500})  # kept its promise: after 1000
        writers[1].write_event({"t": 61_000})
        for writer in writers[:2]:
            writer.flush()
        settle(query)
    finally:
        query.stop()
    events = [r for r in log.rows() if r["kind"] == "event"]
    assert len(events) == 12
    late = sorted(json.loads(r["event"])["t"] for r in events if r["late"])
    assert late == ([1_500] if percentile == "0.9" else [])
    progress = [p.observedMetrics.get("tidemark_late") for p in query.recentProgress]
    observed = [o for o in progress if o is not None]
    assert sum(o["events"] for o in observed) == 12
    assert sum(o["late_events"] for o in observed) == len(late)


@pytest.mark.parametrize("percentile", ["0.9", "1"])
def test_a_straggler_segment_is_late_below_percentile_one(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path, percentile: str
) -> None:
    stream = synthetic_store.create_stream(10)
    segments = [f"{stream}/{n}" for n in range(10)]
    synthetic_store.client.append(segments[0], "straggler", 0, [b'{"n": 0}'] * 20)
    synthetic_store.advance(60_000)
    for segment in segments[1:]:
        synthetic_store.client.append(segment, "others", 0, [b'{"n": 1}'] * 20)
    log = BatchLog()
    read = _read(
        spark,
        synthetic_store,
        stream,
        percentile,
        timeDomain="IngestionTime",
        maxEventsPerTrigger="10",
    )
    query = read_to_end(spark_adapter.observe_late(read), log, tmp_path / "checkpoint")
    events = [r for r in log.rows() if r["kind"] == "event"]
    assert len(events) == 200
    late = [json.loads(r["event"])["n"] for r in events if r["late"]]
    if percentile == "1":
        assert late == []
    else:
        assert late and set(late) == {0}  # only the straggler's, and some of it
        assert len(late) <= 20  # (1 - p) of the 200 events
    progress = [p.observedMetrics.get("tidemark_late") for p in query.recentProgress]
    assert sum(o["late_events"] for o in progress if o is not None) == len(late)


@pytest.mark.parametrize("bad", ["0", "1.5", "most"])
def test_a_bad_percentile_is_refused_naming_the_option(
    spark: Any, synthetic_store: SyntheticStore, bad: str
) -> None:
    stream = synthetic_store.create_stream(1)
    with pytest.raises(Exception, match="watermarkPercentile") as refused:
        _read(spark, synthetic_store, stream, bad, **EVENT_TIME).schema  # noqa: B018 - resolves the options
    assert repr(bad) in str(refused.value) or repr(float(bad)) in str(refused.value)
