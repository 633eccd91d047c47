"""A store server process with TLS and tokens, as the Spark example and cluster tests read it.

The server runs in a process of its own (``python -m connector.server``,
started by the ``spawn_server`` fixture) with a certificate of a throwaway
CA, a token table, and idle ticks every 100 ms, so watermarks move on their
own as on a store in production. Spark's driver and executors reach it with
the CA file and a token file that only grants ``read``.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.security import ClientCredentials, token_entry
from tests.conftest import wait_until
from tests.security.pki import Authority

__all__ = ["SecureServer", "start_secure_server"]

_GRANTS = {"admin": {"*": ["read", "write", "manage"]}, "reader": {"iot": ["read"]}}


@dataclass(frozen=True)
class SecureServer:
    """The server process, its URI, and the files its clients need."""

    process: Any
    uri: str
    ca_file: str
    token_files: dict[str, str]

    def client(self, holder: str = "admin") -> StoreClient:
        """A client with ``holder``'s token (the caller closes it)."""
        credentials = ClientCredentials(
            tls_ca_file=self.ca_file, token_file=self.token_files[holder]
        )
        return StoreClient(self.uri, credentials=credentials)

    def create_stream(self, stream: str, segments: int = 2) -> None:
        """Creates ``scope/stream`` (and its scope)."""
        scope, name = stream.split("/")
        with self.client() as client:
            StreamManager(client).create_scope(scope)
            StreamManager(client).create_stream(scope, name, segment_count=segments)

    def write(self, stream: str, keys: list[str], seqs: range) -> list[tuple[str, int]]:
        """Writes ``{"key", "seq"}`` for each seq and key (seq-major); durable on return."""
        written = []
        with self.client() as client, EventWriter(client, stream, JsonSerializer()) as writer:
            for seq in seqs:
                for key in keys:
                    writer.write_event({"key": key, "seq": seq}, routing_key=key)
                    written.append((key, seq))
        return written

    def wait_for_watermark_past_writes(self, stream: str) -> None:
        """Waits until every open segment's watermark has passed the stream's last write."""
        scope, name = stream.split("/")
        with self.client() as client:
            open_segments = [
                s.segment for s in client.describe_stream(scope, name).segments if not s.sealed
            ]
            infos = [client.segment_info(s) for s in open_segments]
            last = max(info.last_write_time for info in infos)

            def passed() -> bool:
                return all(client.segment_info(s).watermark >= last for s in open_segments)

            wait_until(passed, timeout=30, what="the idle ticks to pass the last write")


def start_secure_server(spawn_server: Callable[..., Any], folder: pathlib.Path) -> SecureServer:
    """Starts the server with a new CA's certificate and a token per holder (admin, reader)."""
    folder.mkdir(parents=True, exist_ok=True)
    authority = Authority(folder, "ca")
    issued = authority.issue("server", server=True)
    token_files = {}
    entries = []
    for holder, rights in _GRANTS.items():
        path = folder / f"{holder}.token"
        token = f"{holder}-" + "t" * 40
        path.write_text(token)
        token_files[holder] = str(path)
        entries.append(token_entry(holder, token, rights))
    table = folder / "tokens.toml"
    table.write_text("\n".join(entries))
    process = spawn_server(
        folder / "data",
        *("--tls-cert", issued.cert_file, "--tls-key", issued.key_file),
        *("--token-file", str(table)),
        *("--max-watermark-lag-ms", "100", "--polling-period-ms", "50"),
    )
    return SecureServer(process, process.uri, authority.cert_file, token_files)


def event_json(key: str, seq: int) -> str:
    """The text the store holds for the event ``{"key", "seq"}``."""
    return json.dumps({"key": key, "seq": seq}, separators=(",", ":"))
