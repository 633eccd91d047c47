"""``tidemarkctl tls dev-certs``: certificates a server and its clients use as they are."""

from __future__ import annotations

import json
import pathlib

from click.testing import CliRunner
from cryptography import x509

from connector import StoreClient
from connector.cli import cli
from connector.security import ClientCredentials, ServerTls
from connector.server import StoreServer
from connector.store import StoreConfig


def test_the_certificates_serve_mutual_tls_for_the_names_given(tmp_path: pathlib.Path, clock):
    made = CliRunner().invoke(
        cli,
        [
            "tls",
            "dev-certs",
            str(tmp_path / "pki"),
            "--host",
            "localhost",
            "--host",
            "127.0.0.1",
            "-o",
            "json",
        ],
    )
    assert made.exit_code == 0, made.output
    files = json.loads(made.stdout)["files"]
    server_cert = x509.load_pem_x509_certificate(pathlib.Path(files["server_cert"]).read_bytes())
    names = server_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n.value) for n in names] == ["localhost", "127.0.0.1"]
    for key in ("ca_key", "server_key", "client_key"):
        assert pathlib.Path(files[key]).stat().st_mode & 0o777 == 0o600

    tls = ServerTls(files["server_cert"], files["server_key"], client_ca_file=files["ca_cert"])
    config = StoreConfig(data_dir=str(tmp_path / "data"), clock=clock, polling_period_ms=None)
    with StoreServer(config, "127.0.0.1:0", tls=tls) as server:
        credentials = ClientCredentials(
            tls_ca_file=files["ca_cert"],
            tls_cert_file=files["client_cert"],
            tls_key_file=files["client_key"],
        )
        for host in ("localhost", "127.0.0.1"):
            uri = server.uri.replace("127.0.0.1", host)
            with StoreClient(uri, credentials=credentials, retry_timeout_s=5) as client:
                assert client.list_scopes() == []


def test_existing_files_are_never_overwritten(tmp_path: pathlib.Path) -> None:
    folder = tmp_path / "pki"
    assert CliRunner().invoke(cli, ["tls", "dev-certs", str(folder)]).exit_code == 0
    before = (folder / "ca.key").read_bytes()
    again = CliRunner().invoke(cli, ["tls", "dev-certs", str(folder)])
    assert again.exit_code == 4
    assert again.stderr.startswith(
        f"tidemarkctl: error: not overwriting {str(folder / 'ca.pem')!r}"
    )
    assert (folder / "ca.key").read_bytes() == before
