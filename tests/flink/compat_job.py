"""The job of the savepoint compatibility test and of the script that wrote its savepoint.

One pipeline for both, so the restored job's graph is the one that was
saved: the source (uid ``compat-source``) whose rows a map appends to a file
as JSON lines, then nothing more (PyFlink needs a sink; the rows end in a
filter that keeps none, before ``print``).
"""

from __future__ import annotations

import json
from typing import Any

from pyflink.common import Types
from pyflink.datastream.functions import MapFunction, RuntimeContext

from flink_adapter import FlinkTidemarkReader, TimeDomain

STREAM = "compat/events"


def source(uri: str) -> FlinkTidemarkReader:
    """The source as the savepoint's job built it."""
    return (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream(STREAM)
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(100)
        .with_parallelism(2)
        .uid("compat-source")
        .build()
    )


class AppendRows(MapFunction):
    """Appends each row to ``path`` as a JSON line: event, late, segment, offset."""

    def __init__(self, path: str):
        self.path = path

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:  # noqa: D102
        self._file.close()

    def map(self, value: Any) -> str:  # noqa: D102
        line = json.dumps({"event": json.loads(value[1]), "late": value[3], "segment": value[4]})
        self._file.write(line + "\n")
        self._file.flush()
        return line


def add_job(env: Any, uri: str, path: str) -> None:
    """Adds the job to ``env``: the source's rows appended to ``path``."""
    rows = source(uri).create_stream(env)
    rows.map(AppendRows(path), output_type=Types.STRING()).filter(lambda _: False).print()
