"""The source on a PyFlink mini-cluster over a real store: windows, idleness, bounded reads.

One job per test (a job takes 10-20 s to start here), each checking several things.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from pyflink.common import Types
from pyflink.common.time import Time
from pyflink.datastream.functions import ProcessFunction, ProcessWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows
from pyflink.table import StreamTableEnvironment

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from examples.job_output import Collected
from flink_adapter import (
    LATE_EVENTS,
    EventTimeOrderingFunction,
    FlinkTidemarkReader,
    StreamCut,
    TimeDomain,
)
from tests.truncation import truncated_stream

pytestmark = [pytest.mark.slow, pytest.mark.long]

LAG_MS = 1_000


class _CountWindow(ProcessWindowFunction):
    def process(self, key: str, context: Any, elements: Any) -> Any:
        yield json.dumps(
            {
                "key": key,
                "start": context.window().start,
                "count": sum(1 for _ in elements),
                "watermark": context.current_watermark(),
            }
        )


def _store_with_stream(start_store: Any) -> tuple[Any, StoreClient]:
    """A store server (idle ticks after 300 ms) holding stream ``w/s`` of 2 segments."""
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("w")
    StreamManager(client).create_stream("w", "s", 2)
    return server, client


def _reader(uri: str, parallelism: int, **stream: Any) -> FlinkTidemarkReader:
    return (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream("w/s", **stream)
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(LAG_MS)
        .with_parallelism(parallelism)
        .build()
    )


def test_a_window_fires_on_the_group_watermark_with_more_readers_than_segments_and_one_idle(
    start_store, clock, flink_env
) -> None:
    server, client = _store_with_stream(start_store)

    def let_time_pass(ms: int = 400) -> None:
        clock.advance(ms)
        server.store.advance_idle_segments()

    for _ in range(25):
        let_time_pass()
    readings = _reader(server.uri, parallelism=3).create_stream(flink_env)
    windows = (
        readings.key_by(lambda row: json.loads(row[1])["sensor"], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .process(_CountWindow(), output_type=Types.STRING())
    )
    window_start = (clock.now_ms() // 1_000 + 1) * 1_000
    early_ts = clock.now_ms() + 60_000
    with windows.execute_and_collect() as results:
        output = Collected(results)
        # One routing key: one segment gets everything, the other stays idle, and the third
        # reader subtask never has a task.
        with EventWriter(client, "w/s", JsonSerializer()) as writer:
            for n in range(5):
                writer.write_event({"sensor": "A", "ts": window_start + 100 * n}, routing_key="k")
            writer.write_event({"sensor": "Z", "ts": early_ts}, routing_key="k")
        for _ in range(40):
            let_time_pass()
            try:
                output.wait_for(lambda rows: rows, "the window", timeout=1.5)
                break
            except AssertionError:
                continue
        output.wait_for(lambda rows: rows, "the window to fire on idle ticks")
        fired = output.rows[0]
    assert (fired["key"], fired["start"], fired["count"]) == ("A", window_start, 5)
    # Fired on the group watermark: past the window, far below the early reading's time,
    # which a watermark following the largest event time would have passed at once.
    assert window_start + 999 <= fired["watermark"] < early_ts - 30_000
    assert all(row["key"] == "A" for row in output.rows), output.rows
    client.close()


class _Tagged(ProcessFunction):
    def __init__(self, kind: str):
        self.kind = kind

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield json.dumps({"kind": self.kind, "event": value[1], "key": value[0]})


@pytest.mark.storages("file", "jetstream")
def test_a_bounded_read_returns_each_event_once_and_ends_the_job_with_the_final_watermark(
    start_store, clock, flink_env
) -> None:
    server, client = _store_with_stream(start_store)
    written = []
    with EventWriter(client, "w/s", JsonSerializer()) as writer:
        for n in range(40):
            reading = {"sensor": f"s{n % 4}", "n": n, "ts": clock.now_ms() + 10 * n}
            writer.write_event(reading, routing_key=reading["sensor"])
            written.append(reading)
    client.scale_stream("w", "s", [0], split_count=2)  # sealed segments are read whole
    reader = _reader(server.uri, parallelism=2, start=StreamCut.earliest(), end="latest")
    readings = reader.create_stream(flink_env)
    ordered = readings.key_by(lambda row: row[0], key_type=Types.STRING()).process(
        EventTimeOrderingFunction(), output_type=reader.output_type()
    )
    late = ordered.get_side_output(LATE_EVENTS).process(_Tagged("late"), output_type=Types.STRING())
    released = ordered.process(_Tagged("released"), output_type=Types.STRING())
    with released.union(late).execute_and_collect() as results:
        rows = Collected(results).wait_until_finished()
    events = [json.loads(row["event"]) for row in rows]
    assert all(row["kind"] == "released" for row in rows), "the final watermark releases all"
    assert sorted(events, key=lambda e: e["n"]) == written
    for sensor in {e["sensor"] for e in written}:
        mine = [e["n"] for e in events if e["sensor"] == sensor]
        assert mine == sorted(mine), sensor
    client.close()


class _Stamped(ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield json.dumps(
            {
                "row": list(value)[:7],  # without the rowtime column (an Instant)
                "timestamp": ctx.timestamp(),
                "watermark": ctx.timer_service().current_watermark(),
            }
        )


def test_the_processing_time_domain_stamps_rows_with_event_time_and_emits_no_watermark(
    start_store, clock, flink_env
) -> None:
    server, client = _store_with_stream(start_store)
    with EventWriter(client, "w/s", JsonSerializer()) as writer:
        for n in range(150):  # several batches and tasks per segment
            writer.write_event({"n": n}, routing_key=f"k{n % 5}")
            clock.advance(1)
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("w/s", start=StreamCut.earliest(), end="latest")
        .with_deserialization_schema("json")
        .with_read_task_size(max_events=40)
        .with_parallelism(2)
        .build()
    )
    stamped = reader.create_stream(flink_env).process(_Stamped(), output_type=Types.STRING())
    with stamped.execute_and_collect() as results:
        rows = [json.loads(row) for row in results]
    fields = dict(enumerate(["routing_key", "event", "event_time", "late", "segment", "offset"]))
    events = [{fields[i]: v for i, v in enumerate(r["row"]) if i in fields} for r in rows]
    assert sorted(json.loads(e["event"])["n"] for e in events) == list(range(150))
    # Event time is ingestion time here, and it is each row's Flink timestamp.
    assert all(r["timestamp"] == r["row"][2] == r["row"][6] for r in rows)
    assert not any(e["late"] for e in events)
    first_event_time = min(r["timestamp"] for r in rows)
    assert all(r["watermark"] < first_event_time for r in rows), {r["watermark"] for r in rows}
    for segment in {e["segment"] for e in events}:
        offsets = [e["offset"] for e in events if e["segment"] == segment]
        assert offsets == sorted(offsets), f"{segment} out of order"
    client.close()


def test_a_table_job_windows_the_source_in_sql_on_its_rowtime_and_watermark(
    start_store, clock, flink_env
) -> None:
    server, client = _store_with_stream(start_store)
    start = clock.now_ms() // 1000 * 1000 + 1000
    times = [start + 70 * n for n in range(60)]  # 4.2 s of readings, 1 s windows
    with EventWriter(client, "w/s", JsonSerializer()) as writer:
        for n, ts in enumerate(times):
            writer.write_event({"n": n, "ts": ts}, routing_key=f"k{n % 3}")
    reader = _reader(server.uri, parallelism=2, start=StreamCut.earliest(), end="latest")
    t_env = StreamTableEnvironment.create(flink_env)
    t_env.create_temporary_view("readings", reader.create_table(flink_env, t_env))
    counts = t_env.execute_sql(
        "SELECT window_start, COUNT(*) AS readings, SUM(CAST(late AS INT)) AS late "
        "FROM TABLE(TUMBLE(TABLE readings, DESCRIPTOR(rt), INTERVAL '1' SECOND)) "
        "GROUP BY window_start, window_end"
    )
    with counts.collect() as results:
        windows = {row[0].timestamp() * 1000: (row[1], row[2]) for row in results}
    expected = Counter(ts // 1000 * 1000 for ts in times)
    assert {int(start): counted for start, counted in windows.items()} == {
        window: (count, 0) for window, count in expected.items()
    }
    client.close()


def test_earliest_starts_at_the_first_readable_offset_after_a_truncation(
    start_store, flink_env
) -> None:
    server = start_store()
    with StoreClient(server.uri) as client:
        kept = truncated_stream(client, "w")
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("w/s", start="earliest", end="latest")
        .with_deserialization_schema("json")
        .with_parallelism(2)
        .build()
    )
    events = reader.create_stream(flink_env).map(lambda row: row[1], output_type=Types.STRING())
    with events.execute_and_collect() as results:
        read = [json.loads(text) for text in results]
    assert sorted(read, key=lambda e: e["n"]) == kept
