"""The late side output in a Java sink: a Table of the source's declared columns, queried in SQL.

A real store server (synthetic clock) and a PyFlink mini-cluster: readings
far behind the watermark reach ``reader.late_events()``; the side output
becomes a Table without a Python function between, a SQL projection in
the JVM reads its typed columns, and Flink's collect sink takes the rows.
"""

from __future__ import annotations

import pytest
from pyflink.common import Types
from pyflink.table import DataTypes, StreamTableEnvironment

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from examples.job_output import Collected
from flink_adapter import OUTPUT_FIELDS, EventTimeOrderingFunction, FlinkTidemarkReader, TimeDomain

pytestmark = pytest.mark.slow

LAG_MS = 1_000
BEHIND_MS = 60_000


def test_late_readings_reach_a_java_sink_as_typed_columns(start_store, clock, flink_env) -> None:
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("w")
    StreamManager(client).create_stream("w", "s", 2)

    def let_time_pass() -> None:
        clock.advance(400)
        server.store.advance_idle_segments()

    for _ in range(25):  # idle ticks: the stream's watermark is near now
        let_time_pass()
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("w/s", start="earliest")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(LAG_MS)
        .with_parallelism(2)
        .build()
    )
    ordered = (
        reader.create_stream(flink_env)
        .key_by(lambda row: row[0], key_type=Types.STRING())
        .process(
            EventTimeOrderingFunction(late=reader.late_events()), output_type=reader.output_type()
        )
    )
    t_env = StreamTableEnvironment.create(flink_env)
    late = t_env.from_data_stream(ordered.get_side_output(reader.late_events()))
    schema = late.get_schema()
    assert tuple(schema.get_field_names()) == OUTPUT_FIELDS
    assert schema.get_field_data_type("event") == DataTypes.STRING()
    assert schema.get_field_data_type("late") == DataTypes.BOOLEAN()
    t_env.create_temporary_view("late_rows", late)
    as_json = t_env.sql_query(
        "SELECT JSON_OBJECT('key' VALUE routing_key, 'n' VALUE CAST(JSON_VALUE(event, '$.n') "
        "AS INT), 'ts' VALUE event_time, 'late' VALUE late) FROM late_rows"
    )
    written = []
    with as_json.execute().collect() as results:
        output = Collected(row[0] for row in results)
        with EventWriter(client, "w/s", JsonSerializer()) as writer:
            # Warm-up readings until one is out: the job runs and its watermark is in force.
            for attempt in range(60):
                warm_up = {"n": -1 - attempt, "ts": clock.now_ms() - BEHIND_MS}
                writer.write_event(warm_up, routing_key="warm-up")
                writer.flush()
                let_time_pass()
                try:
                    output.wait_for(lambda rows: rows, "a warm-up reading", timeout=1.5)
                    break
                except AssertionError:
                    continue
            for n in range(6):
                reading = {"n": n, "ts": clock.now_ms() - BEHIND_MS + n}
                writer.write_event(reading, routing_key=f"k{n % 3}")
                written.append(reading)
        output.wait_for(
            lambda rows: sum(1 for row in rows if row["n"] >= 0) >= len(written), "the readings"
        )
        rows = [row for row in output.rows if row["n"] >= 0]
    assert sorted((row["n"], row["ts"], row["key"]) for row in rows) == [
        (r["n"], r["ts"], f"k{r['n'] % 3}") for r in written
    ]
    assert all(row["late"] is True for row in rows), rows
    client.close()
