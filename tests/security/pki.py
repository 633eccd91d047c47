"""A throwaway certificate authority for the security tests (the `cryptography` package)."""

from __future__ import annotations

import datetime
import ipaddress
import pathlib
from dataclasses import dataclass

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
