"""What a client presents to a store: TLS files and a bearer token, by file.

One value for every entry point: :class:`StoreClient` takes it, and so do the
engines' adapters, through the store URI's query (files only, never a secret,
so a URI can be logged and shown)::

    tidemark://store.example:7070?tls_ca_file=/etc/tidemark/ca.pem&token_file=/etc/tidemark/token

- ``tls_ca_file``: the CA that signed the server's certificate; TLS is on
  when it is given (``tls=1`` turns TLS on with the system's roots instead);
- ``tls_cert_file`` and ``tls_key_file``: a client certificate, for servers
  that require mutual TLS;
- ``token_file``: a file whose first line is the bearer token.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from urllib.parse import parse_qsl, urlencode

import grpc

from connector.errors import InvalidArgumentError
from connector.security.tls import read_file

__all__ = ["TOKEN_METADATA_KEY", "ClientCredentials", "split_uri"]

#: The call metadata key that carries the token, as ``Bearer <token>``.
TOKEN_METADATA_KEY = "authorization"


@dataclass(frozen=True)
class ClientCredentials:
    """The TLS files and token file a client uses; all optional (none: plaintext, no token)."""

    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    token_file: str | None = None
    tls: bool = False

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            msg = (
                "a client certificate needs both tls_cert_file and tls_key_file, got "
                f"tls_cert_file={self.tls_cert_file!r}, tls_key_file={self.tls_key_file!r}"
            )
            raise InvalidArgumentError(msg)

    @property
    def uses_tls(self) -> bool:
        """Whether the channel is encrypted."""
        return self.tls or self.tls_ca_file is not None or self.tls_cert_file is not None

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """The channel's TLS credentials, or None for plaintext."""
        if not self.uses_tls:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=read_file(self.tls_ca_file, "TLS CA") if self.tls_ca_file else None,
            private_key=read_file(self.tls_key_file, "TLS key") if self.tls_key_file else None,
            certificate_chain=(
                read_file(self.tls_cert_file, "TLS certificate") if self.tls_cert_file else None
            ),
        )

    def call_metadata(self) -> tuple[tuple[str, str], ...]:
        """The metadata every call carries: the token, when there is one."""
        if self.token_file is None:
            return ()
        lines = read_file(self.token_file, "token file").decode("utf-8", "replace").splitlines()
        token = lines[0].strip() if lines else ""
        if not token:
            msg = f"the token file {self.token_file!r} is empty"
            raise InvalidArgumentError(msg)
        return ((TOKEN_METADATA_KEY, f"Bearer {token}"),)

    def merged(self, other: ClientCredentials) -> ClientCredentials:
        """These credentials with every field ``other`` sets taken from ``other``."""
        changes = {f.name: getattr(other, f.name) for f in fields(other) if getattr(other, f.name)}
        return replace(self, **changes)

    def to_query(self) -> str:
        """These credentials as a URI query (empty when there are none)."""
        pairs = [(f.name, getattr(self, f.name)) for f in fields(self) if getattr(self, f.name)]
        return urlencode([(k, "1" if v is True else v) for k, v in pairs])


_FIELDS = {f.name for f in fields(ClientCredentials)}


def split_uri(uri: str) -> tuple[str, ClientCredentials]:
    """The URI without its query, and the credentials its query names.

    An unknown query parameter is an error naming it, so a misspelt
    ``tls_ca_file`` does not silently fall back to plaintext.
    """
    base, _, query = uri.partition("?")
    values: dict[str, object] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in _FIELDS:
            known = ", ".join(sorted(_FIELDS))
            msg = f"unknown store uri parameter {key!r} in {uri!r}: expected one of {known}"
            raise InvalidArgumentError(msg)
        values[key] = value in ("1", "true", "yes") if key == "tls" else value
    return base, ClientCredentials(**values)
