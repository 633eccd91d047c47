"""``with_watermark_percentile`` in a PyFlink job: a straggler writer in the event-time domain.

Ten writers assert on one stream; one, the straggler, asserts a minute
behind the others. An ordering function keyed by writer stands for the
job's windows: it releases a writer's events once Flink's watermark passes
them, and sends late ones to the late side output. At 0.9 the watermark
follows the nine: their events come out while the straggler lags, and the
straggler's next event, though it keeps its promise, comes out late
(reported, never dropped). At 1 the watermark waits for the straggler and
nothing is late. A real store server (synthetic clock) and a real PyFlink
mini-cluster.
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

pytestmark = pytest.mark.slow

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
