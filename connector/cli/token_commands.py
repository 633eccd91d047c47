"""``tidemarkctl token``: bearer tokens for clients, and the server's token-file entries."""

from __future__ import annotations

import os
from typing import Any

import click

from connector.cli.app import Failure, Settings, Shown, TidemarkctlGroup
from connector.errors import InvalidArgumentError
from connector.security import new_token, parse_grant, token_entry

__all__ = ["token"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)


def _grants(_ctx: Any, param: click.Parameter, values: tuple[str, ...]) -> dict[str, list[str]]:
    grants: dict[str, list[str]] = {}
    for value in values:
        try:
            scope, rights = parse_grant(value)
        except InvalidArgumentError as error:
            raise click.BadParameter(str(error), param=param) from None
        grants.setdefault(scope, []).extend(r for r in rights if r not in grants.get(scope, []))
    return grants


@click.group(cls=TidemarkctlGroup)
def token() -> None:
    """Bearer tokens: what clients present and the server's token file checks."""


@token.command("create")
@click.argument("name")
@click.option(
    "--grant",
    "grants",
    multiple=True,
    required=True,
    callback=_grants,
    metavar="SCOPE=RIGHTS",
    help="Rights on a scope, e.g. iot=read,write or '*=manage' ('*': every scope); repeatable.",
)
@click.option(
    "--token-out",
    required=True,
    type=click.Path(dir_okay=False),
    help="The file to write the token to (mode 0600; never overwritten).",
)
@pass_settings
def token_create(
    settings: Settings, name: str, grants: dict[str, list[str]], token_out: str
) -> Shown:
    """Makes a token for NAME: the token goes to --token-out, its entry to stdout.

    Append the entry to the server's token file (it keeps the token's hash
    only) and send the server SIGHUP; the client names --token-out with
    token_file=... in its URI. The token is shown nowhere else.
    """
    secret = new_token()
    try:
        descriptor = os.open(token_out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        msg = f"--token-out {token_out!r} exists already: a token file is never overwritten"
        raise Failure(msg, 4, "AlreadyExistsError") from None
    except OSError as error:
        msg = f"cannot write --token-out {token_out!r}: {error.strerror}"
        raise Failure(msg, 1, "OSError") from None
    with os.fdopen(descriptor, "w") as out:
        out.write(secret + "\n")
    entry = token_entry(name, secret, grants)
    value = {"name": name, "grants": grants, "token_file": token_out, "entry": entry}
    return Shown(value, entry.rstrip("\n"))
