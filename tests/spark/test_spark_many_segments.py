"""A query over 1,024 idle segments costs the store what changes, not what exists.

Counted with the server's request counters (real server over gRPC, real
Spark local session): a trigger over idle segments is one small
``DescribeTails`` call, the report of the latest offset that follows it
none, and a micro-batch with one new event a few calls more, never one per
segment. And counted in the segment cursors the driver makes: none for an
idle trigger, one for the segment an event moved, each once when a tick
moved them all. Synthetic clock, no idle advancer: nothing changes unless a test
changes it.
"""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from connector.client import StoreClient
from connector.clock import ManualClock
from connector.reader.source import Frontier
from connector.server import StoreServer
from spark_adapter.options import for_stream, idle_wait_ms, read_spec
from spark_adapter.reading import TidemarkStreamReader
from spark_adapter.schema import tidemark_schema
from tests.conftest import WIDE, wait_until
from tests.probes import CallCounter, CursorCount

from .conftest import BatchLog, settle

pytestmark = pytest.mark.slow


def _drivers(
    server: StoreServer, stream: str
) -> Iterator[tuple[dict[str, str], TidemarkStreamReader]]:
    """The query's source as Spark's driver makes it: without a limit, then with one."""
    options = {"uri": server.uri, "stream": stream, "timeDomain": "IngestionTime"}
    for limit in ({}, {"maxEventsPerTrigger": "10"}):
        spec = for_stream(read_spec({**options, **limit}))
        yield limit, TidemarkStreamReader(spec, tidemark_schema(spec.deserializer))


def test_latest_offset_over_idle_segments_costs_one_small_call_and_its_report_none(
    wide: tuple[StoreServer, StoreClient, str],
) -> None:
    server, client, stream = wide
    for limit, reader in _drivers(server, stream):
        try:
            read_limit = reader.getDefaultReadLimit()
            start = reader.latestOffset(reader.initialOffset(), read_limit)  # the first batch's
            reader.reportLatestOffset()
            counted = CallCounter(server)
            for _ in range(5):  # Spark asks again and again while nothing moves
                assert reader.latestOffset(start, read_limit) == start
                reported = reader.reportLatestOffset()
                assert counted.since() == {"all": 1, "DescribeTails": 1}, limit
            assert [figures["unreadEvents"] for figures in reported["streams"].values()] == [0]
        finally:
            reader.stop()


def test_a_query_over_idle_segments_makes_one_call_a_trigger_and_a_batch_a_few(
    spark: Any, wide: tuple[StoreServer, StoreClient, str], tmp_path: pathlib.Path
) -> None:
    server, client, stream = wide
    log = BatchLog()
    query = (
        spark.readStream.format("tidemark")
        .options(uri=server.uri, stream=stream, timeDomain="IngestionTime")
        .load()
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        settle(query)
        counted = CallCounter(server)
        triggers = counted.wait_for("DescribeTails", 20, timeout=60, what="20 idle triggers")
        assert set(triggers) == {"all", "DescribeTails"}, triggers  # nothing else, no segment

        client.append(f"{stream}/700", "w", 0, [b"one"])
        counted.since()
        wait_until(lambda: log.rows(), timeout=60, what="the micro-batch of the event")
        settle(query)
        batch = counted.since()
        [row] = [r for r in log.rows() if r["kind"] == "event"]
        assert (row["segment"], row["event"]) == (f"{stream}/700", "one")
    finally:
        query.stop()
    # The batch's plan, its task's read and the lag: a few calls, whatever the segments.
    per_segment = {m: n for m, n in batch.items() if m not in ("all", "DescribeTails")}
    assert sum(per_segment.values()) <= 10, batch
    assert batch.get("GetSegmentInfo", 0) == 0 and batch.get("PlanRead", 0) == 0, batch


def _handed_back(offset: dict[str, Any]) -> dict[str, Any]:
    """An offset as Spark hands it back to the source: through its JSON."""
    return json.loads(json.dumps(offset))


def test_a_trigger_touches_only_the_segments_that_moved(
    wide: tuple[StoreServer, StoreClient, str],
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted in segment cursors made: none while idle, one per segment moved, not per segment."""
    server, client, stream = wide
    for limit, reader in _drivers(server, stream):
        cursors = CursorCount(monkeypatch)
        try:
            read_limit = reader.getDefaultReadLimit()
            start = _handed_back(reader.initialOffset())
            start = _handed_back(reader.latestOffset(start, read_limit))
            reader.reportLatestOffset()
            cursors.since()
            for _ in range(5):  # Spark asks again and again while nothing moves
                assert _handed_back(reader.latestOffset(start, read_limit)) == start
                _handed_back(reader.reportLatestOffset())
                assert cursors.since() == 0, limit

            segment = f"{stream}/700"
            client.append(segment, f"w{len(limit)}", 0, [b"one"])
            end = _handed_back(reader.latestOffset(_handed_back(start), read_limit))
            _handed_back(reader.reportLatestOffset())
            [partition] = reader.partitions(_handed_back(start), _handed_back(end))
            assert [r.segment for r in partition.task.ranges] == [segment]
            assert cursors.since() <= 2, limit  # the segment that moved, not all of them
            moved = Frontier.from_dict(end).state.cursors[segment].offset
            assert moved > Frontier.from_dict(start).state.cursors[segment].offset
            cursors.since()  # not counting the cursors these two checks made

            clock.advance(server.store.config.max_watermark_lag_ms + 1)
            assert server.store.advance_idle_segments() >= WIDE - 1  # all but the one written
            after_tick = _handed_back(reader.latestOffset(_handed_back(end), read_limit))
            assert after_tick["watermark"] > end["watermark"]
            _handed_back(reader.reportLatestOffset())
            reader.partitions(_handed_back(end), _handed_back(after_tick))
            assert cursors.since() <= WIDE, limit  # every segment moved: each once
        finally:
            reader.stop()


def test_a_trigger_after_an_idle_one_waits_on_the_store_until_a_change(
    wide: tuple[StoreServer, StoreClient, str],
) -> None:
    """``idleWait``: the second idle ``latestOffset`` in a row waits on the store.

    One ``DescribeTails`` parks on the server (so Spark's 10 ms polling asks
    the store a few times a second), and an event ends the wait with the
    offset that holds it.
    """
    server, client, stream = wide
    options = {"uri": server.uri, "stream": stream, "timeDomain": "IngestionTime"}
    options["idleWait"] = "30 seconds"  # far longer than the test: only the event ends it
    spec = for_stream(read_spec(options))
    reader = TidemarkStreamReader(
        spec, tidemark_schema(spec.deserializer), idle_wait_ms=idle_wait_ms(options)
    )
    try:
        limit = reader.getDefaultReadLimit()
        start = reader.latestOffset(reader.initialOffset(), limit)
        assert reader.latestOffset(start, limit) == start  # nothing new: the next one waits
        counted = CallCounter(server)
        answer: list[dict[str, Any]] = []
        waiting = threading.Thread(target=lambda: answer.append(reader.latestOffset(start, limit)))
        waiting.start()
        parked = server.metrics.registry.get_sample_value
        wait_until(
            lambda: parked("tidemark_parked_calls", {"method": "DescribeTails"}) == 1,
            what="the trigger's DescribeTails parked on the server",
        )
        assert answer == []
        client.append(f"{stream}/7", "w", 0, [b"late riser"])
        waiting.join(timeout=10)
        assert not waiting.is_alive(), "the event ended the wait"
        assert answer[0] != start
        assert counted.since()["DescribeTails"] == 1
    finally:
        reader.stop()
