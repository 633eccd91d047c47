"""Why a store cannot be reached, found by one short exchange: for error messages only.

A client that cannot reach a store asks this to say why, when the reason is
one a retry will not mend: plaintext against a TLS port, or TLS against a
plaintext one (:func:`probe_transport`); or a TLS handshake that fails
(:func:`tls_failure`): the server's certificate does not name the host the
client dialled, or is signed by a CA the client does not trust; or the server
requires a client certificate and got none, or one of a CA it does not trust.
gRPC reports each of these as the store being unavailable, after its C-core
logged the handshake; this repeats the handshake with Python's ``ssl`` to
name the cause.
"""

from __future__ import annotations

import socket
import ssl
from typing import Literal

from connector.security.credentials import ClientCredentials

__all__ = ["probe_transport", "tls_failure"]

# The HTTP/2 client preface (RFC 9113, 3.4) followed by an empty SETTINGS frame.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS_FRAME_TYPE = 0x04
_TLS_ALERT_RECORD = 0x15
#: OpenSSL's reasons for an answer to a ClientHello that is no TLS record at all (a
#: plaintext HTTP/2 server sends its SETTINGS frame first): no TLS server answered.
_NOT_TLS_REASONS = frozenset(
    {
        "WRONG_VERSION_NUMBER",
        "RECORD_LAYER_FAILURE",
        "PACKET_LENGTH_TOO_LONG",
        "UNKNOWN_PROTOCOL",
        "HTTP_REQUEST",
    }
)


def probe_transport(address: str, timeout_s: float = 1.0) -> Literal["tls", "plaintext", None]:
    """What ``host:port`` speaks, by how it answers the HTTP/2 preface in the clear.

    ``"plaintext"`` when it answers in HTTP/2, ``"tls"`` when it answers as a
    TLS server does (an alert, or hanging up), None when it cannot tell.
    """
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as sock:
            sock.sendall(_H2_PREFACE)
            answer = sock.recv(16)
    except (OSError, ValueError):
        return None
    if len(answer) >= 4 and answer[3] == _SETTINGS_FRAME_TYPE:
        return "plaintext"
    if answer and answer[0] == _TLS_ALERT_RECORD:
        return "tls"
    if not answer:
        # A TLS server may hang up on bytes that are no handshake; so does a load balancer
        # whose server went away, or a server stopping. Only a TLS handshake tells them apart.
        return "tls" if _answers_tls(host.strip("[]"), int(port), timeout_s) else None
    return None


def _answers_tls(host: str, port: int, timeout_s: float) -> bool:
    """Whether ``host:port`` answers a TLS ClientHello as a TLS server (certificates unchecked)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True  # the handshake went through
    except ssl.SSLEOFError:
        return False  # hung up again, with no handshake: nothing says TLS
    except ssl.SSLError as error:
        # An answer that is no TLS record: a plaintext server (behind a load balancer
        # that found its server again since the first look). Else a TLS alert (a client
        # certificate wanted, say): a TLS server.
        return error.reason not in _NOT_TLS_REASONS
    except OSError:
        return False


# OpenSSL's verify codes (X509_V_ERR_*) that mean "not a CA this client trusts".
_UNTRUSTED = {2, 18, 19, 20, 21}
_HOST_MISMATCH = {62, 64}  # hostname, IP address
# Alerts a server sends when it refuses the client's certificate (or its absence).
_NO_CLIENT_CERT_ALERTS = {"TLSV13_ALERT_CERTIFICATE_REQUIRED", "SSLV3_ALERT_HANDSHAKE_FAILURE"}
_BAD_CLIENT_CERT_ALERTS = {
    "TLSV1_ALERT_UNKNOWN_CA",
    "SSLV3_ALERT_BAD_CERTIFICATE",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
    "TLSV1_ALERT_DECRYPT_ERROR",
}


def tls_failure(address: str, credentials: ClientCredentials, timeout_s: float = 1.0) -> str | None:
    """Why a TLS handshake with ``address`` (``host:port``) fails, or None if it does not.

    Checks what gRPC checks: the server's certificate against the client's CA
    (``tls_ca_file``, or the system's with ``tls=1``) and the host in the
    URI, then whether the server takes the client's certificate (or its
    absence). None also when the server cannot be reached or speaks no TLS
    (:func:`probe_transport` tells that).
    """
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    trusted = repr(credentials.tls_ca_file) if credentials.tls_ca_file else "the system's CAs"
    try:
        context = ssl.create_default_context(cafile=credentials.tls_ca_file)
        if credentials.tls_cert_file and credentials.tls_key_file:
            context.load_cert_chain(credentials.tls_cert_file, credentials.tls_key_file)
        context.set_alpn_protocols(["h2"])
    except (ssl.SSLError, OSError) as error:
        return f"the client's TLS files cannot be used: {error}"
    try:
        with (
            socket.create_connection((host, int(port)), timeout=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host) as channel,
        ):
            channel.sendall(_H2_PREFACE)
            answered = channel.recv(16)
    except ssl.SSLCertVerificationError as error:
        if error.verify_code in _HOST_MISMATCH:
            return (
                f"the server's certificate is not valid for {host!r}, the host this client "
                "dialled: connect by a name the certificate lists, or issue one that lists it"
            )
        if error.verify_code in _UNTRUSTED:
            return (
                f"the server's certificate is not signed by a CA this client trusts "
                f"({trusted}): {error.verify_message}"
            )
        return f"the server's certificate was refused: {error.verify_message}"
    except ssl.SSLError as error:
        if error.reason in _NO_CLIENT_CERT_ALERTS and not credentials.tls_cert_file:
            return _NO_CLIENT_CERT
        if error.reason in _BAD_CLIENT_CERT_ALERTS | _NO_CLIENT_CERT_ALERTS:
            return _bad_client_cert(credentials)
        return None  # no TLS there, most likely: probe_transport says
    except (OSError, ValueError):
        return None
    if answered:
        return None
    # The handshake went through and the server hung up at once: a gRPC server does that to a
    # client whose certificate it requires (--tls-client-ca) and did not get, or does not trust.
    return _bad_client_cert(credentials) if credentials.tls_cert_file else _NO_CLIENT_CERT


_NO_CLIENT_CERT = (
    "the server requires a client certificate (mutual TLS) and this client has none: "
    "give tls_cert_file and tls_key_file"
)


def _bad_client_cert(credentials: ClientCredentials) -> str:
    return (
        f"the server refused this client's certificate ({credentials.tls_cert_file!r}): "
        "it is not signed by the CA the server trusts for clients (--tls-client-ca)"
    )
