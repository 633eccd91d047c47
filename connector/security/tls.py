"""TLS for both ends: which files a server or a client uses, made into gRPC credentials.

Files are read when credentials are made, so a bad path is reported by name
at start rather than at the first call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from connector.errors import InvalidArgumentError

__all__ = ["ServerTls", "read_file"]


def read_file(path: str | Path, what: str) -> bytes:
    """The bytes of ``path``; an unreadable file is an error naming ``what`` and the path."""
    try:
        return Path(path).read_bytes()
    except OSError as error:
        msg = f"cannot read the {what} {str(path)!r}: {error.strerror}"
        raise InvalidArgumentError(msg) from None


@dataclass(frozen=True)
class ServerTls:
    """A server's certificate chain and key (PEM files), and optionally a client CA.

    With ``client_ca_file`` the server asks every client for a certificate
    signed by that CA (mutual TLS) and refuses a connection without one.
    """

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """The gRPC server credentials these files describe."""
        chain = read_file(self.cert_file, "TLS certificate")
        key = read_file(self.key_file, "TLS key")
        client_ca = read_file(self.client_ca_file, "client CA") if self.client_ca_file else None
        return grpc.ssl_server_credentials(
            [(key, chain)],
            root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )
