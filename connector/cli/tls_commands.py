"""``tidemarkctl tls``: certificates for development (a CA, a server's, a client's)."""

from __future__ import annotations

import click

from connector.cli.app import Failure, Settings, Shown, TidemarkctlGroup

__all__ = ["tls"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)


@click.group(cls=TidemarkctlGroup)
def tls() -> None:
    """TLS certificates for development and tests."""


@tls.command("dev-certs")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option(
    "--host",
    "hosts",
    multiple=True,
    default=("localhost", "127.0.0.1"),
    show_default=True,
    metavar="NAME",
    help="A name or address clients dial the server by (repeatable): the certificate lists each.",
)
@click.option(
    "--client", default="client", show_default=True, help="The client certificate's name."
)
@click.option("--days", type=click.IntRange(min=1), default=365, show_default=True)
@pass_settings
def dev_certs(
    settings: Settings, folder: str, hosts: tuple[str, ...], client: str, days: int
) -> Shown:
    """Writes a new CA, a server certificate and a client certificate into FOLDER.

    ca.pem (clients' tls_ca_file, and the server's --tls-client-ca), server.pem
    and server.key (the server's --tls-cert and --tls-key), client.pem and
    client.key (a client's tls_cert_file and tls_key_file, for mutual TLS).
    Keys are written with mode 0600; no file is overwritten. For development
    and tests: in production, use certificates of your own CA.
    """
    try:
        from connector.security.dev_certificates import write_dev_certificates
    except ImportError as error:
        msg = f"tls dev-certs needs the cryptography package (pip install '.[tls]'): {error}"
        raise Failure(msg, 1, "ImportError") from None
    written = write_dev_certificates(folder, hosts, client, days)
    files = {name: str(path) for name, path in vars(written).items()}
    text = "\n".join(
        [
            f"wrote a CA, a server certificate for {', '.join(hosts)} and a client certificate:",
            f"  server: --tls-cert {files['server_cert']} --tls-key {files['server_key']}"
            f"  (mutual TLS: --tls-client-ca {files['ca_cert']})",
            f"  client: tls_ca_file={files['ca_cert']}  (mutual TLS: "
            f"tls_cert_file={files['client_cert']}&tls_key_file={files['client_key']})",
        ]
    )
    return Shown({"hosts": list(hosts), "files": files}, text)
