"""Fixtures for the security tests: a CA, server and client certificates, a token file."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from connector.security import ServerTls, TokenTable, token_entry
from connector.server import StoreServer
from connector.store import StoreConfig
from tests.security.pki import Authority, Issued

#: Tokens of the test token file, by who holds them, and the rights each has.
GRANTS: dict[str, dict[str, list[str]]] = {
    "admin": {"*": ["read", "write", "manage"]},
    "iot-writer": {"iot": ["read", "write"]},
    "iot-reader": {"iot": ["read"]},
    "other": {"other": ["read", "write", "manage"]},
}


@dataclass(frozen=True)
class Pki:
    """The files of the test CA, the server's certificate and two clients' certificates."""

    ca: str
    server: Issued
    client: Issued
    rogue_client: Issued


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    authority = Authority(folder, "tidemark-test-ca")
    rogue = Authority(folder, "rogue-ca")
    return Pki(
        ca=authority.cert_file,
        server=authority.issue("server", server=True),
        client=authority.issue("client", server=False),
        rogue_client=rogue.issue("rogue-client", server=False),
    )


@pytest.fixture
def token_of(tmp_path: pathlib.Path) -> dict[str, str]:
    """A token file path per holder (``token_of["admin"]`` is a file holding admin's token)."""
    files = {}
    for holder in GRANTS:
        path = tmp_path / f"{holder}.token"
        path.write_text(f"{holder}-token-" + "x" * 40 + "\n")
        files[holder] = str(path)
    return files


@pytest.fixture
def token_table_file(tmp_path: pathlib.Path, token_of: dict[str, str]) -> pathlib.Path:
    """The server's token file: every holder's token, hashed, with its grants."""
    path = tmp_path / "tokens.toml"
    entries = [
        token_entry(holder, pathlib.Path(token_of[holder]).read_text().strip(), grants)
        for holder, grants in GRANTS.items()
    ]
    path.write_text("\n".join(entries))
    return path


@pytest.fixture
def start_secure_store(data_dir: pathlib.Path, clock: Any) -> Iterator[Callable[..., StoreServer]]:
    """Starts in-process servers with the given ``tls`` / ``tokens``; stops them after the test."""
    servers: list[StoreServer] = []

    def start(
        *, tls: ServerTls | None = None, tokens: TokenTable | None = None, **kwargs: Any
    ) -> StoreServer:
        config = StoreConfig(data_dir=str(data_dir), clock=clock, polling_period_ms=None)
        server = StoreServer(config, "127.0.0.1:0", tls=tls, tokens=tokens, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        server.stop(grace_s=0.5)
