"""docs/security.md's commands, run as written through a shell."""

from __future__ import annotations

import pathlib
import signal
import subprocess

import pytest

from connector import StoreClient
from connector.errors import UnauthenticatedError
from tests.conftest import _read_listening_line, wait_until
from tests.readme import DOCS, localized, shell, shell_block, shell_env

pytestmark = pytest.mark.slow


def test_certificates_tokens_a_tls_server_and_a_token_reload_as_the_readme_writes_them(
    tmp_path: pathlib.Path,
) -> None:
    certs, ingest, ops, start, create, late, reload = shell_block("kill -HUP", DOCS / "security.md")
    for command in (certs, ingest, ops):
        done = shell(command, tmp_path)
        assert done.returncode == 0, (command, done.stderr)
    assert (tmp_path / "pki" / "server.key").stat().st_mode & 0o777 == 0o600
    # Tests listen on loopback only: the one place changed, with the data dir.
    places = {"DIR": "data", "0.0.0.0:7070": "127.0.0.1:0"}
    server = subprocess.Popen(
        ["bash", "-c", localized(start, places)],
        cwd=tmp_path,
        env=shell_env(),
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "server.log").open("wb"),
    )
    try:
        port = _read_listening_line(server, timeout=30).rpartition(":")[2]
        made = shell(localized(create, {"localhost:7070": f"localhost:{port}"}), tmp_path)
        assert (made.returncode, made.stdout) == (0, "scope iot created\n"), made.stderr
        assert shell(late, tmp_path).returncode == 0
        files = f"tls_ca_file={tmp_path}/pki/ca.pem&token_file={tmp_path}/late.token"
        uri = f"tidemark://localhost:{port}?{files}"
        with StoreClient(uri, retry_timeout_s=5) as client:
            with pytest.raises(UnauthenticatedError):
                client.list_streams("iot")  # not yet: the server has not re-read tokens.toml
            assert shell(reload, tmp_path).returncode == 0

            def late_token_works() -> bool:
                try:
                    return client.list_streams("iot") == []
                except UnauthenticatedError:
                    return False

            wait_until(late_token_works, timeout=10, what="the token added before SIGHUP")
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
        assert server.stdout is not None
        server.stdout.close()
