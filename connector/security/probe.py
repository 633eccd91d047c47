"""Which transport a server speaks, found by one short exchange: for error messages only.

A client that cannot reach a store asks this to say why when the reason is a
mismatch: plaintext against a TLS port, or TLS against a plaintext one.
"""

from __future__ import annotations

import socket
from typing import Literal

__all__ = ["probe_transport"]

# The HTTP/2 client preface (RFC 9113, 3.4) followed by an empty SETTINGS frame.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS_FRAME_TYPE = 0x04
_TLS_ALERT_RECORD = 0x15


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
    if not answer or answer[0] == _TLS_ALERT_RECORD:
        # A TLS server either sends an alert or hangs up on bytes that are no handshake.
        return "tls"
    return None
