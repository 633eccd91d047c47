"""A Flink job reads a store that requires TLS and a token, with the builder's credentials."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from pyflink.common import Types

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from examples.job_output import Collected
from flink_adapter import FlinkTidemarkReader
from tests.security.pki import secure_store

pytestmark = pytest.mark.slow


def test_a_flink_job_reads_with_tls_and_a_read_token_only_its_scope(
    tmp_path: pathlib.Path, clock: Any, flink_env: Any
) -> None:
    grants = {"admin": {"*": ["read", "write", "manage"]}, "reader": {"iot": ["read"]}}
    with secure_store(tmp_path, clock, grants) as store:
        server = store.server
        with StoreClient(server.uri, credentials=store.credentials("admin")) as client:
            StreamManager(client).create_scope("iot")
            StreamManager(client).create_stream("iot", "s", segment_count=2)
            with EventWriter(client, "iot/s", JsonSerializer()) as writer:
                for n in range(10):
                    writer.write_event({"n": n}, routing_key=f"k{n}")
        reader = (
            FlinkTidemarkReader.builder()
            .with_store(server.uri, credentials=store.credentials("reader"))
            .for_stream("iot/s", end="latest")
            .with_deserialization_schema("json")
            .build()
        )
        assert "secret" not in reader.settings.spec.uri  # files, never the token itself
        out = reader.create_stream(flink_env).map(lambda row: row[1], output_type=Types.STRING())
        with out.execute_and_collect() as results:
            rows = Collected(results).wait_until_finished()
    assert sorted(row["n"] for row in rows) == list(range(10))
