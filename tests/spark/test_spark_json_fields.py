"""Declared JSON fields as typed columns in Spark, parsed in the JVM; bad declarations refused.

The events and the expected flags are those of the Flink builder's test
(``tests/flink/test_flink_json_fields.py``): the same meaning in both.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
from pyspark.sql import functions as F  # noqa: N812

from connector import EventWriter, JsonSerializer, StoreClient, StringSerializer
from connector.errors import InvalidArgumentError
from spark_adapter import with_json_fields
from tests.conftest import new_stream_in

pytestmark = pytest.mark.slow

FIELDS = "sensor STRING, value DOUBLE, n INT"
HOT = {"sensor": "s0", "value": "hot", "n": 100}
MISSING = {"sensor": "s1", "n": 101}
AS_TEXT = {"sensor": "s2", "value": "2.5", "n": "102"}  # a string holding a number converts


def _compact(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


def _read(spark: Any, uri: str, stream: str, deserializer: str = "json") -> Any:
    options = {"uri": uri, "stream": stream, "deserializer": deserializer}
    return spark.read.format("tidemark").options(**options).load()


def test_declared_fields_come_as_typed_columns_and_a_mismatch_is_flagged_not_dropped(
    spark: Any, file_store_uri: str
) -> None:
    good = [{"sensor": f"s{n % 3}", "value": n / 4, "n": n, "extra": [n]} for n in range(9)]
    with StoreClient(file_store_uri) as client:
        stream = new_stream_in(client, 2)
        with EventWriter(client, stream, JsonSerializer()) as writer:
            for event in [*good, HOT, MISSING, AS_TEXT]:
                writer.write_event(event, routing_key=event["sensor"])
        with EventWriter(client, stream, StringSerializer()) as writer:
            writer.write_event("not json", routing_key="s2")
    typed = with_json_fields(_read(spark, file_store_uri, stream), FIELDS)

    assert typed.columns[-4:] == ["sensor", "value", "n", "malformed"]
    assert [typed.schema[c].dataType.simpleString() for c in typed.columns[-4:]] == [
        "string",
        "double",
        "int",
        "boolean",
    ]
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        typed.explain()
    assert "from_json" in plan.getvalue()
    for python_operator in ("EvalPython", "PythonUDF", "InPandas", "MapInArrow"):
        assert python_operator not in plan.getvalue()  # no Python after the source

    columns = ("event", "sensor", "value", "n", "malformed")
    rows = [r.asDict() for r in typed.select(*columns).collect()]
    assert len(rows) == len(good) + 4, "no event is dropped"
    bad = sorted((r["event"], r["sensor"], r["value"], r["n"]) for r in rows if r["malformed"])
    assert bad == sorted(
        [
            ("not json", None, None, None),
            (_compact(HOT), "s0", None, 100),  # the value does not convert to DOUBLE
            (_compact(MISSING), "s1", None, 101),  # no value
        ]
    )
    fine = sorted((r for r in rows if not r["malformed"]), key=lambda r: r["n"])
    assert [(r["sensor"], r["value"], r["n"]) for r in fine] == [
        *((e["sensor"], e["value"], e["n"]) for e in good),
        ("s2", 2.5, 102),
    ]
    # Typed columns work as Spark columns, in the JVM.
    totals = typed.where(~F.col("malformed")).groupBy("sensor").agg(F.sum("n").alias("n"))
    assert {r["sensor"]: r["n"] for r in totals.collect()} == {
        s: sum(e["n"] for e in good if e["sensor"] == s) + (102 if s == "s2" else 0)
        for s in ("s0", "s1", "s2")
    }


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ("", "expected fields"),
        ("INT", "expected fields"),
        ("sensor STRING,, n INT", "is not a list of fields"),
        ("event STRING", "'event' is named like a column"),
        ("malformed BOOLEAN", "'malformed' is named like a column"),
        ("n INT, N BIGINT", "'N' is named like"),
    ],
)
def test_a_declaration_that_cannot_work_is_refused_when_the_plan_is_built(
    spark: Any, file_store_uri: str, fields: str, match: str
) -> None:
    with StoreClient(file_store_uri) as client:
        stream = new_stream_in(client, 1)
    with pytest.raises(InvalidArgumentError, match=match):
        with_json_fields(_read(spark, file_store_uri, stream), fields)


def test_binary_events_are_refused_naming_the_deserializer(spark: Any, file_store_uri: str) -> None:
    with StoreClient(file_store_uri) as client:
        stream = new_stream_in(client, 1)
    with pytest.raises(InvalidArgumentError, match="option 'deserializer' 'json' or 'string'"):
        with_json_fields(_read(spark, file_store_uri, stream, "bytes"), FIELDS)
