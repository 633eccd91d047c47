"""A throwaway certificate authority for the security tests (the `cryptography` package)."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files."""

    cert_file: str
    key_file: str


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class Authority:
    """A CA that writes its certificate and the ones it issues under ``folder``."""

    def __init__(self, folder: pathlib.Path, name: str):
        self.folder = folder
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_NOW)
            .not_valid_after(_NOW + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_file = str(folder / f"{name}.pem")
        pathlib.Path(self.cert_file).write_bytes(
            self._cert.public_bytes(serialization.Encoding.PEM)
        )

    def issue(self, name: str, *, server: bool) -> Issued:
        """A certificate for ``name``; a server's is valid for 127.0.0.1 and localhost."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_NOW)
            .not_valid_after(_NOW + datetime.timedelta(days=3650))
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        issued = Issued(str(self.folder / f"{name}.crt"), str(self.folder / f"{name}.key"))
        pathlib.Path(issued.cert_file).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pathlib.Path(issued.key_file).write_bytes(_key_pem(key))
        return issued


@dataclass(frozen=True)
class SecureStore:
    """A store server with TLS and tokens, and the files its clients need."""

    server: Any
    ca_file: str
    token_files: dict[str, str]

    def credentials(self, holder: str) -> Any:
        """The client credentials of ``holder``: the CA and its token file."""
        from connector.security import ClientCredentials

        return ClientCredentials(tls_ca_file=self.ca_file, token_file=self.token_files[holder])


@contextlib.contextmanager
def secure_store(
    folder: pathlib.Path, clock: Any, grants: dict[str, dict[str, list[str]]]
) -> Iterator[SecureStore]:
    """Runs a store server with a TLS certificate of a new CA and one token per holder."""
    from connector.security import ServerTls, TokenTable, token_entry
    from connector.server import StoreServer
    from connector.store import StoreConfig

    authority = Authority(folder, "ca")
    server_cert = authority.issue("server", server=True)
    token_files = {}
    for holder in grants:
        path = folder / f"{holder}.token"
        path.write_text(f"{holder}-secret-" + "s" * 40)
        token_files[holder] = str(path)
    table = folder / "tokens.toml"
    table.write_text(
        "\n".join(
            token_entry(h, pathlib.Path(token_files[h]).read_text(), g) for h, g in grants.items()
        )
    )
    config = StoreConfig(data_dir=str(folder / "data"), clock=clock, polling_period_ms=None)
    tls = ServerTls(server_cert.cert_file, server_cert.key_file)
    with StoreServer(config, tls=tls, tokens=TokenTable(table)) as server:
        yield SecureStore(server, authority.cert_file, token_files)
