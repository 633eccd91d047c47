"""``with_watermark_percentile`` in a PyFlink job: a straggler writer and a straggler segment.

Ten writers assert on one stream; one, the straggler, asserts a minute
behind the others. An ordering function keyed by writer stands for the
job's windows: it releases a writer's events once Flink's watermark passes
them, and sends late ones to the late side output. At 0.9 the watermark
follows the nine: their events come out while the straggler lags, and the
straggler's next event, though it keeps its promise, comes out late
(reported, never dropped). At 1 the watermark waits for the straggler and
nothing is late. In the ingestion-time domain a straggler segment (one of
ten holds 20 events a minute older than the others' 180), read 10 events an
epoch, the oldest first: at 0.9 the watermark passes the straggler's rest
once its first epoch is read, so the rest comes out late, no more of it
than 1 - p of the events; at 1 nothing is late. A real store server
(synthetic clock) and a real PyFlink mini-cluster.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyflink.common import Types

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from examples.job_output import Collected
from flink_adapter import EventTimeOrderingFunction, FlinkTidemarkReader, TimeDomain
from tests.conftest import CLOCK_START_MS
from tests.flink.conftest import environment

pytestmark = [pytest.mark.slow, pytest.mark.long]

T = CLOCK_START_MS
OTHERS = [f"w{i}" for i in range(1, 10)]


def _job(env: Any, uri: str, stream: str, percentile: float) -> Any:
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream(stream, start="earliest")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.EVENT_TIME)
        .with_timestamp_assigner("t")
        .with_watermark_percentile(percentile)
        .with_parallelism(1)
        .build()
    )
    ordered = (
        reader.create_stream(env)
        .key_by(lambda row: row[0], key_type=Types.STRING())
        .process(
            EventTimeOrderingFunction(late=reader.late_events()), output_type=reader.output_type()
        )
    )
    on_time = ordered.map(lambda r: json.dumps({"kind": "on time", "event": r[1]}), Types.STRING())
    late = ordered.get_side_output(reader.late_events()).map(
        lambda r: json.dumps({"kind": "late", "event": r[1]}), Types.STRING()
    )
    return on_time.union(late)


def _of(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The rows of the events whose ``n`` is ``n``, on time or late."""
    return [r for r in rows if json.loads(r["event"])["n"] == n]


def _out(rows: list[dict[str, Any]], kind: str) -> list[tuple[str, int]]:
    events = [json.loads(r["event"]) for r in rows if r["kind"] == kind]
    return sorted((e["w"], e["t"]) for e in events)


@pytest.mark.parametrize("percentile", [0.9, 1.0])
def test_a_straggler_writers_event_comes_out_late_below_percentile_one(
    start_store, percentile: float
) -> None:
    server = start_store()
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("p")
    client.create_stream("p", "s", 1)
    writers = {
        name: EventWriter(client, "p/s", JsonSerializer(), writer_id=name)
        for name in ["w0", *OTHERS]
    }
    for name, writer in writers.items():
        t = T + 500 if name == "w0" else T + 59_000
        writer.write_event({"w": name, "t": t}, routing_key=name)
        writer.note_time(t + 500)
    env = environment()
    env.set_parallelism(1)
    with _job(env, server.uri, "p/s", percentile).execute_and_collect() as results:
        output = Collected(results)
        if percentile < 1:
            # The others' events come out while the straggler still asserts T + 1 s.
            output.wait_for(lambda rows: len(_out(rows, "on time")) == 10, "the nine and w0")
        else:
            output.wait_for(lambda rows: _out(rows, "on time") == [("w0", T + 500)], "w0 alone")
        writers["w0"].write_event({"w": "w0", "t": T + 1_500}, routing_key="w0")  # kept promise
        writers["w0"].note_time(T + 2_000)
        writers["w0"].close()  # idle: it holds nobody back any more
        output.wait_for(lambda rows: len(rows) == 11, "every event, on time or late")
    late = _out(output.rows, "late")
    assert late == ([("w0", T + 1_500)] if percentile < 1 else [])
    others = [e for e in _out(output.rows, "on time") if e[0] != "w0"]
    assert others == [(name, T + 59_000) for name in OTHERS]
    client.close()


@pytest.mark.parametrize("percentile", [0.9, 1.0])
def test_a_straggler_segments_rest_comes_out_late_below_percentile_one(
    start_store, clock, percentile: float
) -> None:
    server = start_store(max_watermark_lag_ms=0)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("q")
    client.create_stream("q", "s", 10)
    client.append("q/s/0", "straggler", 0, [b'{"n": 0}'] * 20)
    clock.advance(60_000)
    server.store.advance_idle_segments()
    for number in range(1, 10):
        client.append(f"q/s/{number}", "others", 0, [b'{"n": 1}'] * 20)
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("q/s", start="earliest")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_watermark_percentile(percentile)
        .with_epoch_budget(10, None)
        .with_parallelism(1)
        .build()
    )
    env = environment()
    env.set_parallelism(1)
    ordered = (
        reader.create_stream(env)
        .key_by(lambda row: "all", key_type=Types.STRING())
        .process(
            EventTimeOrderingFunction(late=reader.late_events()), output_type=reader.output_type()
        )
    )
    on_time = ordered.map(lambda r: json.dumps({"kind": "on time", "event": r[1]}), Types.STRING())
    late = ordered.get_side_output(reader.late_events()).map(
        lambda r: json.dumps({"kind": "late", "event": r[1]}), Types.STRING()
    )
    with on_time.union(late).execute_and_collect() as results:
        output = Collected(results)
        output.wait_for(lambda rows: len(_of(rows, 0)) == 20, "the straggler's events")
        clock.advance(1_000)  # the others' events come out once the watermark passes them
        server.store.advance_idle_segments()
        output.wait_for(lambda rows: len(rows) == 200, "every event, on time or late")
    came_late = [json.loads(r["event"])["n"] for r in output.rows if r["kind"] == "late"]
    assert len(_of(output.rows, 1)) == 180
    if percentile < 1:
        assert came_late and set(came_late) == {0}  # only the straggler's, and some of it
        assert len(came_late) <= 20  # (1 - p) of the 200 events
    else:
        assert came_late == []
    client.close()
