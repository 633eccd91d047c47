"""A TLS handshake that fails is named for what it is, at once, not after the retry budget."""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from connector import StoreClient
from connector.errors import StoreUnavailableError
from connector.security import ClientCredentials, ServerTls
from connector.server import StoreServer
from connector.store import StoreConfig
from tests.readme import shell_env


@pytest.fixture
def tls_server(pki, data_dir: pathlib.Path, clock) -> Iterator[StoreServer]:
    tls = ServerTls(pki.server.cert_file, pki.server.key_file)
    config = StoreConfig(data_dir=str(data_dir), clock=clock, polling_period_ms=None)
    with StoreServer(config, "127.0.0.1:0", tls=tls) as server:
        yield server


@pytest.fixture
def mtls_server(pki, data_dir: pathlib.Path, clock) -> Iterator[StoreServer]:
    tls = ServerTls(pki.server.cert_file, pki.server.key_file, client_ca_file=pki.ca)
    config = StoreConfig(data_dir=str(data_dir), clock=clock, polling_period_ms=None)
    with StoreServer(config, "127.0.0.1:0", tls=tls) as server:
        yield server


def refusal(uri: str, credentials: ClientCredentials) -> str:
    """The error a first call fails with; the budget is long, so a timeout would show."""
    with StoreClient(uri, retry_timeout_s=60, credentials=credentials) as client:
        with pytest.raises(StoreUnavailableError) as failed:
            client.list_scopes()
    message = str(failed.value)
    assert "could not be reached within" not in message, "it waited instead of naming the cause"
    return message


def rogue_ca(pki) -> str:
    return str(pathlib.Path(pki.ca).parent / "rogue-ca.pem")


def test_a_server_certificate_of_an_unknown_ca(tls_server: StoreServer, pki) -> None:
    message = refusal(tls_server.uri, ClientCredentials(tls_ca_file=rogue_ca(pki)))
    assert f"TLS handshake with the store {tls_server.uri!r} failed" in message
    assert f"not signed by a CA this client trusts ({rogue_ca(pki)!r})" in message


def test_a_host_name_not_in_the_server_certificate(pki, data_dir: pathlib.Path, clock) -> None:
    # The certificate names localhost and 127.0.0.1; the server is dialled as 127.0.0.2.
    tls = ServerTls(pki.server.cert_file, pki.server.key_file)
    config = StoreConfig(data_dir=str(data_dir), clock=clock, polling_period_ms=None)
    with StoreServer(config, "127.0.0.2:0", tls=tls) as server:
        message = refusal(server.uri, ClientCredentials(tls_ca_file=pki.ca))
    assert "the server's certificate is not valid for '127.0.0.2'" in message


def test_a_missing_client_certificate(mtls_server: StoreServer, pki) -> None:
    message = refusal(mtls_server.uri, ClientCredentials(tls_ca_file=pki.ca))
    assert "requires a client certificate (mutual TLS) and this client has none" in message


def test_a_client_certificate_of_a_ca_the_server_does_not_trust(
    mtls_server: StoreServer, pki
) -> None:
    rogue = ClientCredentials(
        tls_ca_file=pki.ca,
        tls_cert_file=pki.rogue_client.cert_file,
        tls_key_file=pki.rogue_client.key_file,
    )
    message = refusal(mtls_server.uri, rogue)
    assert f"the server refused this client's certificate ({pki.rogue_client.cert_file!r})" in (
        message
    )


def test_the_command_line_says_it_in_one_line_without_grpc_logs(
    tls_server: StoreServer, pki
) -> None:
    uri = f"{tls_server.uri}?tls_ca_file={rogue_ca(pki)}"
    shown = subprocess.run(
        ["tidemarkctl", "scope", "list", "--uri", uri],
        capture_output=True,
        text=True,
        timeout=60,
        env=shell_env(),
        check=False,
    )
    assert shown.returncode == 6
    (line,) = shown.stderr.splitlines()
    assert line.startswith(f"tidemarkctl: error: TLS handshake with the store {tls_server.uri!r}")
    assert "not signed by a CA this client trusts" in line
