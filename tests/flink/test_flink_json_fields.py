"""Declared JSON fields as typed columns, on a mini-cluster over a real store; bad ones refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyflink.common import Types
from pyflink.table import StreamTableEnvironment

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager, StringSerializer
from connector.errors import InvalidArgumentError
from flink_adapter import OUTPUT_FIELDS, EventTimeOrderingFunction, FlinkTidemarkReader, TimeDomain

pytestmark = pytest.mark.slow

FIELDS = {"sensor": Types.STRING(), "value": Types.DOUBLE(), "n": Types.INT()}
HOT = {"sensor": "s0", "value": "hot", "n": 100}
MISSING = {"sensor": "s1", "n": 101}


def _compact(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


def _builder(uri: str) -> Any:
    return (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream("w/s", start="earliest", end="latest")
        .with_deserialization_schema("json")
    )


def test_declared_fields_come_as_typed_columns_and_a_mismatch_is_flagged_not_dropped(
    start_store, flink_env
) -> None:
    server = start_store()
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("w")
        StreamManager(client).create_stream("w", "s", 2)
        good = [{"sensor": f"s{n % 3}", "value": n / 4, "n": n, "extra": [n]} for n in range(9)]
        with EventWriter(client, "w/s", JsonSerializer()) as writer:
            for event in good:
                writer.write_event(event, routing_key=event["sensor"])
            writer.write_event(HOT, routing_key="s0")
            writer.write_event(MISSING, routing_key="s1")
        with EventWriter(client, "w/s", StringSerializer()) as writer:
            writer.write_event("not json", routing_key="s2")
    reader = _builder(server.uri).with_json_fields(FIELDS).with_parallelism(2).build()

    t_env = StreamTableEnvironment.create(flink_env)
    table = reader.create_table(flink_env, t_env)
    assert tuple(table.get_schema().get_field_names()) == (
        *OUTPUT_FIELDS,
        "sensor",
        "value",
        "n",
        "malformed",
    )
    t_env.create_temporary_view("readings", table)
    # Keyed by a declared field in the JVM: no Python function parses JSON.
    per_sensor = t_env.execute_sql(
        "SELECT sensor, COUNT(*), SUM(`value`), SUM(n) FROM readings "
        "WHERE NOT malformed GROUP BY sensor"
    )
    with per_sensor.collect() as results:
        totals = {}
        for row in results:  # a changelog: the last row per sensor is its total
            totals[row[0]] = (row[1], row[2], row[3])
    assert totals == {
        s: (
            sum(1 for e in good if e["sensor"] == s),
            sum(e["value"] for e in good if e["sensor"] == s),
            sum(e["n"] for e in good if e["sensor"] == s),
        )
        for s in ("s0", "s1", "s2")
    }

    # The DataStream rows carry the typed columns after rt; mismatches come out flagged.
    rows = reader.create_stream(flink_env).map(
        lambda row: json.dumps(
            {"event": row[1], "sensor": row[8], "value": row[9], "n": row[10], "bad": row[11]}
        ),
        output_type=Types.STRING(),
    )
    with rows.execute_and_collect() as results:
        read = [json.loads(text) for text in results]
    bad = [(r["event"], r["sensor"], r["value"], r["n"]) for r in read if r["bad"]]
    assert sorted(bad) == sorted(
        [
            ("not json", None, None, None),
            (_compact(HOT), "s0", None, 100),  # the value does not convert to DOUBLE
            (_compact(MISSING), "s1", None, 101),  # no value
        ]
    )
    fine = sorted((r for r in read if not r["bad"]), key=lambda r: r["n"])
    assert [(r["sensor"], r["value"], r["n"]) for r in fine] == [
        (e["sensor"], e["value"], e["n"]) for e in good
    ]
    assert all(isinstance(r["n"], int) and isinstance(r["value"], float) for r in fine)


def test_the_ordering_function_keys_by_a_declared_field_and_keeps_the_typed_columns(
    start_store, clock, flink_env
) -> None:
    server = start_store()
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("w")
        StreamManager(client).create_stream("w", "s", 2)
        written = [
            {"sensor": f"s{n % 3}", "value": n / 2, "n": n, "ts": clock.now_ms() + 10 * n}
            for n in range(12)
        ]
        with EventWriter(client, "w/s", JsonSerializer()) as writer:
            for event in written:
                writer.write_event(event, routing_key=f"r{event['n'] % 4}")
    reader = (
        _builder(server.uri)
        .with_json_fields(FIELDS)
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_parallelism(2)
        .build()
    )
    ordered = (
        reader.create_stream(flink_env)
        .key_by(lambda row: row[8], key_type=Types.STRING())  # the declared field "sensor"
        .process(
            EventTimeOrderingFunction(late=reader.late_events()), output_type=reader.output_type()
        )
    )

    def as_json(kind: str) -> Any:
        return lambda row: json.dumps(
            {"kind": kind, "sensor": row[8], "value": row[9], "n": row[10], "bad": row[11]}
        )

    late = ordered.get_side_output(reader.late_events()).map(
        as_json("late"), output_type=Types.STRING()
    )
    released = ordered.map(as_json("released"), output_type=Types.STRING())
    with released.union(late).execute_and_collect() as results:
        rows = [json.loads(text) for text in results]
    assert all(row["kind"] == "released" for row in rows), "the final watermark releases all"
    assert sorted((r["n"], r["sensor"], r["value"], r["bad"]) for r in rows) == [
        (e["n"], e["sensor"], e["value"], False) for e in written
    ]
    for sensor in ("s0", "s1", "s2"):
        mine = [r["n"] for r in rows if r["sensor"] == sensor]
        assert mine == sorted(mine), sensor  # released in event-time order per key


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({}, "{}"),
        ({"value": Types.PICKLED_BYTE_ARRAY()}, "'value'"),
        ({"value": "DECIMAL"}, "'DECIMAL'"),
        ({"a.b": "INT"}, "'a.b'"),
        ({"late": "BOOLEAN"}, "'late'"),
        ({"malformed": "BOOLEAN"}, "'malformed'"),
        ([("n", "INT"), ("n", "BIGINT")], "'n'"),
        ("sensor", "'sensor'"),
    ],
)
def test_a_bad_declaration_is_refused_at_build_naming_the_method_and_the_value(
    fields: Any, named: str
) -> None:
    builder = _builder("tidemark://127.0.0.1:1").with_json_fields(fields)
    with pytest.raises(InvalidArgumentError) as refused:
        builder.build(check_store=False)
    message = str(refused.value)
    assert message.startswith("with_json_fields: "), message
    assert message.count("with_json_fields") == 1, message
    assert named in message, message


def test_declared_fields_need_the_json_schema() -> None:
    builder = (
        FlinkTidemarkReader.builder()
        .with_store("tidemark://127.0.0.1:1")
        .for_stream("w/s")
        .with_deserialization_schema("string")
        .with_json_fields({"n": "INT"})
    )
    with pytest.raises(InvalidArgumentError, match=r"^with_json_fields: .*'string'"):
        builder.build(check_store=False)
