"""A Spark write and read through the tidemark format against a store with TLS and tokens."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from connector import StoreClient, StreamManager
from connector.security import ClientCredentials, ServerTls, TokenTable, token_entry
from connector.server import StoreServer
from connector.store import StoreConfig
from tests.security.pki import Authority

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
    authority = Authority(tmp_path, "ca")
    server_cert = authority.issue("server", server=True)
    files = {}
    for holder in GRANTS:
        files[holder] = tmp_path / f"{holder}.token"
        files[holder].write_text(f"{holder}-secret-" + "s" * 40)
    (tmp_path / "tokens.toml").write_text(
        "\n".join(token_entry(h, files[h].read_text(), g) for h, g in GRANTS.items())
    )
    config = StoreConfig(data_dir=str(tmp_path / "data"), clock=clock, polling_period_ms=None)
    tls = ServerTls(server_cert.cert_file, server_cert.key_file)
    with StoreServer(config, tls=tls, tokens=TokenTable(tmp_path / "tokens.toml")) as server:
        admin = ClientCredentials(tls_ca_file=authority.cert_file, token_file=str(files["admin"]))
        with StoreClient(server.uri, credentials=admin) as client:
            StreamManager(client).create_scope("iot")
            StreamManager(client).create_stream("iot", "sensors", segment_count=2)

        def options(holder: str) -> dict[str, str]:
            return {
                "uri": server.uri,
                "stream": "iot/sensors",
                "tlsCaFile": authority.cert_file,
                "tokenFile": str(files[holder]),
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
