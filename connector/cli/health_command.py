"""``tidemarkctl health``: whether the store takes writes, as the gRPC health service says."""

from __future__ import annotations

import click

from connector._wire import DATA_SERVICE
from connector.cli.app import EXIT_DATA_LOSS, Failure, Settings, Shown, TidemarkctlCommand
from connector.errors import NotFoundError

__all__ = ["health"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)

#: The exit code while the store answers but refuses writes (as for a refusal by its state).
EXIT_NOT_SERVING = 5


@click.command("health", cls=TidemarkctlCommand)
@pass_settings
def health(settings: Settings) -> Shown:
    """Whether the store takes writes: exit 0 SERVING, 5 NOT_SERVING, 6 unreachable.

    Asks the standard grpc.health.v1.Health service on the store's port
    (needs no token), as grpc_health_probe and orchestrators do. Exit 8
    when it takes writes but a read met damaged data (DATA_LOSS).
    """
    client = settings.client()
    status = client.health()
    base = settings.uri.partition("?")[0]
    if status != "SERVING":
        msg = f"store {base!r} is {status}: it refuses writes (out of disk space, or stopping)"
        raise Failure(msg, EXIT_NOT_SERVING, status)
    try:
        intact = client.health(DATA_SERVICE) == "SERVING"
    except NotFoundError:  # a server from before the data's health
        intact = True
    if not intact:
        msg = (
            f"store {base!r} takes writes, but a read met damaged data (DATA_LOSS): its log "
            "names the segment and offset (metric tidemark_data_loss_reads_total)"
        )
        raise Failure(msg, EXIT_DATA_LOSS, "DATA_LOSS")
    return Shown({"uri": base, "status": status}, f"{base}: {status}")
