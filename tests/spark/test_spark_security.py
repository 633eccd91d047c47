"""A Spark write and read through the tidemark format against a store with TLS and tokens."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from connector import StoreClient, StreamManager
from tests.security.pki import secure_store

pytestmark = pytest.mark.slow

GRANTS = {
    "admin": {"*": ["read", "write", "manage"]},
    "iot-writer": {"iot": ["read", "write"]},
    "iot-reader": {"iot": ["read"]},
    "other": {"other": ["read", "write", "manage"]},
}


def test_spark_reads_and_writes_with_tls_and_scope_tokens(
    spark: Any, tmp_path: pathlib.Path, clock: Any
) -> None:
    with secure_store(tmp_path, clock, GRANTS) as store:
        server = store.server
        with StoreClient(server.uri, credentials=store.credentials("admin")) as client:
            StreamManager(client).create_scope("iot")
            StreamManager(client).create_stream("iot", "sensors", segment_count=2)

        def options(holder: str) -> dict[str, str]:
            return {
                "uri": server.uri,
                "stream": "iot/sensors",
                "tlsCaFile": store.ca_file,
                "tokenFile": store.token_files[holder],
            }

        rows = [(f"k{n}", f'{{"n": {n}}}') for n in range(6)]
        frame = spark.createDataFrame(rows, "routing_key string, event string")
        frame.write.format("tidemark").options(**options("iot-writer")).mode("append").save()

        read = spark.read.format("tidemark").options(**options("iot-reader"), deserializer="json")
        assert sorted(r["routing_key"] for r in read.load().select("routing_key").collect()) == [
            f"k{n}" for n in range(6)
        ]

        with pytest.raises(Exception, match="PermissionDeniedError|PERMISSION_DENIED"):
            frame.write.format("tidemark").options(**options("iot-reader")).mode("append").save()
        with pytest.raises(Exception, match="PermissionDeniedError|PERMISSION_DENIED"):
            spark.read.format("tidemark").options(**options("other")).load().collect()
        plan = read.load()._jdf.queryExecution().toString()
        assert "secret" not in plan  # options name files, never the tokens themselves
