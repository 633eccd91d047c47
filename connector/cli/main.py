"""The ``tidemarkctl`` command: manage and inspect a store from a shell.

    tidemarkctl --uri 'tidemark://host:7070?token_file=/etc/tidemark/token' stream describe s/t
    tidemarkctl stream describe s/t -o json

Human output by default, ``-o json`` (or ``--json``) for scripts, before or
after the command's name (one JSON document, or one per line for ``stream
tail``). Errors are one line on stderr, naming the bad value (a JSON object
with ``-o json``). Exit codes: 0 done; 1 another error; 2 a bad command line
or value; 3 not found; 4 already exists; 5 refused by the store's state
(sealed, busy, out of space); 6 the store is unreachable; 7 the token is
missing or lacks a right; 8 data found damaged (DATA_LOSS, ``data-dir
check``); 130 interrupted (Ctrl-C; ``stream tail`` exits 0).
"""

from __future__ import annotations

import click

from connector.cli.app import EXIT_CODES, TidemarkctlRoot
from connector.cli.data_dir_commands import data_dir
from connector.cli.health_command import health
from connector.cli.pipeline_commands import pipeline_command
from connector.cli.readergroup_commands import readergroup
from connector.cli.scope_commands import scope
from connector.cli.stream_commands import stream
from connector.cli.tls_commands import tls
from connector.cli.token_commands import token
from connector.cli.watermark_commands import watermarks_command

__all__ = ["EXIT_CODES", "cli", "main"]

#: The distribution this command comes with (its version is ``--version``'s).
DISTRIBUTION = "tidemark-store"


@click.group(
    cls=TidemarkctlRoot,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
)
@click.version_option(package_name=DISTRIBUTION, prog_name="tidemarkctl")
def cli() -> None:
    """Manage and inspect a Tidemark store."""


for _command in (
    scope,
    stream,
    readergroup,
    watermarks_command,
    pipeline_command,
    health,
    token,
    tls,
    data_dir,
):
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Runs the command line (the ``tidemarkctl`` console script) and exits."""
    cli.main(args=argv, prog_name="tidemarkctl")
