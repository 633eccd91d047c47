"""Certificates for development and tests: a CA, a server certificate, a client certificate.

    tidemarkctl tls dev-certs pki --host localhost --host 127.0.0.1

A new CA signs a server certificate whose subject alternative names are the
given hosts (DNS names or IP addresses: exactly the names clients dial) and
a client certificate for mutual TLS. Keys are P-256, written with mode 0600.
For development and tests only: in production, certificates come from your
own CA, which keeps its key elsewhere. Needs the ``cryptography`` package
(the ``tls`` extra).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from connector.errors import AlreadyExistsError, InvalidArgumentError

__all__ = ["DevCertificates", "write_dev_certificates"]

_Key = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class DevCertificates:
    """Where :func:`write_dev_certificates` put each PEM file."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def write_dev_certificates(
    folder: str | Path,
    hosts: Sequence[str] = ("localhost", "127.0.0.1"),
    client: str = "client",
    days: int = 365,
    now: datetime.datetime | None = None,
) -> DevCertificates:
    """Writes a CA, a server certificate for ``hosts`` and a client certificate into ``folder``.

    Files: ``ca.pem``, ``ca.key``, ``server.pem``, ``server.key``,
    ``client.pem``, ``client.key``; valid from ``now`` (default: an hour ago,
    for clocks a little behind) for ``days`` days.

    Raises:
        InvalidArgumentError: no host, an empty one, or ``days`` < 1.
        AlreadyExistsError: one of the files exists (nothing is overwritten).
    """
    names = [h.strip() for h in hosts]
    if not names or not all(names):
        msg = f"the server certificate needs at least one host name or address, got {hosts!r}"
        raise InvalidArgumentError(msg)
    if days < 1:
        msg = f"days must be >= 1, got {days!r}"
        raise InvalidArgumentError(msg)
    target = Path(folder)
    files = DevCertificates(
        *(target / f for f in ("ca.pem", "ca.key", "server.pem", "server.key")),
        target / "client.pem",
        target / "client.key",
    )
    existing = [str(p) for p in vars(files).values() if p.exists()]
    if existing:
        msg = f"not overwriting {', '.join(repr(p) for p in existing)}"
        raise AlreadyExistsError(msg)
    start = now or datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    end = start + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tidemark development CA")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key, start, end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    target.mkdir(parents=True, exist_ok=True)
    _write(files.ca_cert, files.ca_key, ca_cert, ca_key)
    for cert_file, key_file, subject, extensions in (
        (files.server_cert, files.server_key, names[0], _server_extensions(names)),
        (files.client_cert, files.client_key, client, _client_extensions()),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        builder = _builder(name, ca_name, key, start, end)
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        _write(cert_file, key_file, builder.sign(ca_key, hashes.SHA256()), key)
    return files


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: _Key,
    start: datetime.datetime,
    end: datetime.datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )


def _usage(cert_sign: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _alternative_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return x509.DNSName(host)


def _server_extensions(hosts: Sequence[str]) -> list[tuple[x509.ExtensionType, bool]]:
    names = x509.SubjectAlternativeName([_alternative_name(h) for h in hosts])
    return [
        (names, False),
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (_usage(), True),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
    ]


def _client_extensions() -> list[tuple[x509.ExtensionType, bool]]:
    return [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (_usage(), True),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False),
    ]


def _write(cert_file: Path, key_file: Path, cert: x509.Certificate, key: _Key) -> None:
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(key_bytes)
