"""The server command's security flags, in a real server process."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

from connector import StoreClient
from connector.errors import UnauthenticatedError
from connector.security import ClientCredentials, token_entry

pytestmark = pytest.mark.slow


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "connector.server", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_without_a_token_file_the_server_refuses_a_non_loopback_address(tmp_path):
    result = _run("--data-dir", str(tmp_path / "d"), "--listen", "0.0.0.0:0")
    assert result.returncode == 2
    assert "without authentication" in result.stderr and "'0.0.0.0:0'" in result.stderr


def test_tls_flags_go_together(tmp_path, pki):
    result = _run("--data-dir", str(tmp_path / "d"), "--tls-cert", pki.server.cert_file)
    assert result.returncode == 2 and "--tls-cert and --tls-key go together" in result.stderr


def test_without_a_token_file_the_server_says_so_at_start(tmp_path, spawn_server):
    server = spawn_server(tmp_path / "d")
    with StoreClient(server.uri) as client:
        client.create_scope("iot")  # answered: the server is up and has logged its start
    assert "no authentication" in server.log()


def test_sighup_reloads_the_token_file(tmp_path, spawn_server, wait_until):
    old, new = "old-token-" + "o" * 40, "new-token-" + "n" * 40
    table = tmp_path / "tokens.toml"
    table.write_text(token_entry("old", old, {"*": ["read", "manage"]}))
    (tmp_path / "old.token").write_text(old)
    (tmp_path / "new.token").write_text(new)
    server = spawn_server(tmp_path / "d", "--token-file", str(table))
    as_old = StoreClient(
        server.uri, credentials=ClientCredentials(token_file=str(tmp_path / "old.token"))
    )
    as_new = StoreClient(
        server.uri, credentials=ClientCredentials(token_file=str(tmp_path / "new.token"))
    )
    try:
        as_old.create_scope("iot")
        with pytest.raises(UnauthenticatedError):
            as_new.create_scope("other")
        table.write_text(token_entry("new", new, {"*": ["read", "manage"]}))
        os.kill(server.process.pid, signal.SIGHUP)

        def new_token_works() -> bool:
            try:
                as_new.create_scope("other")
            except UnauthenticatedError:
                return False
            return True

        wait_until(new_token_works, timeout=10)
        with pytest.raises(UnauthenticatedError):
            as_old.create_scope("third")
        assert "token file reloaded: 1 token(s)" in server.log()
    finally:
        as_old.close()
        as_new.close()


def test_a_bad_token_file_on_sighup_keeps_the_old_tokens(tmp_path, spawn_server, wait_until):
    token = "keep-token-" + "k" * 40
    table = tmp_path / "tokens.toml"
    table.write_text(token_entry("keep", token, {"*": ["manage"]}))
    (tmp_path / "keep.token").write_text(token)
    server = spawn_server(tmp_path / "d", "--token-file", str(table))
    table.write_text("[[token]\n")
    os.kill(server.process.pid, signal.SIGHUP)
    wait_until(lambda: "not reloaded" in server.log(), timeout=10)
    credentials = ClientCredentials(token_file=str(tmp_path / "keep.token"))
    with StoreClient(server.uri, credentials=credentials) as client:
        client.create_scope("iot")
    assert pathlib.Path(table).exists()
