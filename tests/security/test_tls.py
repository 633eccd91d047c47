"""TLS and mutual TLS between a real server and the client, and the errors of a mismatch."""

from __future__ import annotations

import socket
import threading

import pytest

from connector import StoreClient, StreamManager
from connector.errors import InvalidArgumentError, StoreUnavailableError
from connector.security import ClientCredentials, ServerTls, TokenTable
from connector.security.probe import probe_transport


def test_a_client_trusting_the_ca_talks_to_a_tls_server(start_secure_store, pki):
    server = start_secure_store(tls=ServerTls(pki.server.cert_file, pki.server.key_file))
    with StoreClient(f"{server.uri}?tls_ca_file={pki.ca}") as client:
        StreamManager(client).create_scope("iot")
        assert client.create_stream("iot", "s", 1).stream == "s"


def test_plaintext_against_a_tls_port_is_refused_and_the_error_says_why(start_secure_store, pki):
    server = start_secure_store(tls=ServerTls(pki.server.cert_file, pki.server.key_file))
    with StoreClient(server.uri, retry_timeout_s=0.5) as client:
        with pytest.raises(StoreUnavailableError, match="speaks TLS and this client plaintext"):
            client.describe_stream("iot", "s")


def test_tls_against_a_plaintext_port_is_refused_and_the_error_says_why(start_secure_store, pki):
    server = start_secure_store()
    with StoreClient(f"{server.uri}?tls_ca_file={pki.ca}", retry_timeout_s=0.5) as client:
        with pytest.raises(StoreUnavailableError, match="does not speak TLS"):
            client.describe_stream("iot", "s")


def test_mutual_tls_admits_only_clients_with_a_certificate_of_its_ca(start_secure_store, pki):
    tls = ServerTls(pki.server.cert_file, pki.server.key_file, client_ca_file=pki.ca)
    server = start_secure_store(tls=tls)
    with StoreClient(
        server.uri, retry_timeout_s=0.5, credentials=ClientCredentials(tls_ca_file=pki.ca)
    ) as no_cert:
        with pytest.raises(StoreUnavailableError):
            no_cert.create_scope("iot")
    rogue = ClientCredentials(
        tls_ca_file=pki.ca,
        tls_cert_file=pki.rogue_client.cert_file,
        tls_key_file=pki.rogue_client.key_file,
    )
    with StoreClient(server.uri, retry_timeout_s=0.5, credentials=rogue) as client:
        with pytest.raises(StoreUnavailableError):
            client.create_scope("iot")
    good = ClientCredentials(
        tls_ca_file=pki.ca, tls_cert_file=pki.client.cert_file, tls_key_file=pki.client.key_file
    )
    with StoreClient(server.uri, credentials=good) as client:
        client.create_scope("iot")
        assert client.create_stream("iot", "s", 2).segments


def test_tls_and_tokens_together(start_secure_store, pki, token_table_file, token_of):
    server = start_secure_store(
        tls=ServerTls(pki.server.cert_file, pki.server.key_file),
        tokens=TokenTable(token_table_file),
    )
    credentials = ClientCredentials(tls_ca_file=pki.ca, token_file=token_of["admin"])
    with StoreClient(server.uri, credentials=credentials) as client:
        client.create_scope("iot")
        assert client.describe_stream  # reachable
        assert client.create_stream("iot", "s", 1).scope == "iot"


def test_credential_settings_are_checked_before_any_call(pki, tmp_path):
    with pytest.raises(InvalidArgumentError, match="tls_key_file"):
        ClientCredentials(tls_cert_file=pki.client.cert_file)
    with pytest.raises(InvalidArgumentError, match="unknown store uri parameter 'tls_ca'"):
        StoreClient(f"tidemark://127.0.0.1:1?tls_ca={pki.ca}")
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(InvalidArgumentError, match="cannot read the TLS CA"):
        StoreClient(f"tidemark://127.0.0.1:1?tls_ca_file={missing}")


def test_a_port_that_hangs_up_without_a_tls_handshake_is_not_taken_for_tls() -> None:
    """A load balancer whose server went away (or a server stopping) hangs up at once.

    Taking that for a TLS port told a client retrying through a failover that
    its transport was wrong, and it gave up (found with several JetStream
    servers behind one address, issue 22).
    """
    listener = socket.create_server(("127.0.0.1", 0))

    def hang_up() -> None:
        for _ in range(2):
            connection, _ = listener.accept()
            connection.recv(1024)  # what the client sent is read: the hang-up is a clean close
            connection.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        assert probe_transport(f"127.0.0.1:{listener.getsockname()[1]}") is None
    finally:
        thread.join(timeout=5)
        listener.close()


def test_a_port_that_hangs_up_then_answers_in_http2_is_not_taken_for_tls() -> None:
    """A load balancer that finds its plaintext server again between the two looks.

    The first look (the HTTP/2 preface) meets a hang-up; the second (a TLS
    ClientHello) meets the server's HTTP/2 SETTINGS frame, which is no TLS
    record. Taking that for TLS made writers behind a failover give up
    with "speaks TLS" after a server was killed (issue 22's leader kills).
    """
    listener = socket.create_server(("127.0.0.1", 0))
    empty_settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"

    def hang_up_then_answer() -> None:
        connection, _ = listener.accept()
        connection.recv(1024)
        connection.close()
        connection, _ = listener.accept()
        connection.sendall(empty_settings)  # what an HTTP/2 server sends first
        connection.recv(1024)
        connection.close()

    thread = threading.Thread(target=hang_up_then_answer, daemon=True)
    thread.start()
    try:
        assert probe_transport(f"127.0.0.1:{listener.getsockname()[1]}") is None
    finally:
        thread.join(timeout=5)
        listener.close()
