"""How ``tidemarkctl`` runs a command: the options every command takes, output, errors.

Every command takes ``--uri``, ``--timeout`` and ``-o/--output`` (``--json``
is ``-o json``), before its name or after it, so ``tidemarkctl stream
describe iot/s --json`` and ``tidemarkctl --json stream describe iot/s`` are
the same. A command returns a :class:`Shown`: a JSON value and the text
people read; :class:`TidemarkctlCommand` prints one or the other. Errors are
one line on stderr (one JSON object with ``-o json``), and the exit code
says what kind of error it was (:data:`EXIT_CODES`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click

from connector.client import StoreClient
from connector.errors import (
    AlreadyExistsError,
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    StoreUnavailableError,
    TidemarkError,
    UnauthenticatedError,
)

__all__ = [
    "DEFAULT_URI",
    "EXIT_CODES",
    "EXIT_DATA_LOSS",
    "EXIT_INTERRUPTED",
    "Failure",
    "Settings",
    "Shown",
    "TidemarkctlCommand",
    "TidemarkctlGroup",
    "TidemarkctlRoot",
    "failure_of",
]

PROG = "tidemarkctl"
DEFAULT_URI = "tidemark://127.0.0.1:7070"

#: The exit code of data found damaged (DATA_LOSS).
EXIT_DATA_LOSS = 8

#: The exit code of each kind of error (the first that matches); any other error exits 1,
#: a bad command line 2.
EXIT_CODES: list[tuple[type[TidemarkError], int]] = [
    (InvalidArgumentError, 2),
    (NotFoundError, 3),
    (AlreadyExistsError, 4),
    (FailedPreconditionError, 5),
    (ResourceExhaustedError, 5),
    (StoreUnavailableError, 6),
    (UnauthenticatedError, 7),
    (PermissionDeniedError, 7),
    (DataLossError, EXIT_DATA_LOSS),
]
#: Ctrl-C, as shells report a process that SIGINT ended (128 + 2).
EXIT_INTERRUPTED = 130


@dataclass
class Settings:
    """Where the store is and how to print: what the common options set."""

    uri: str = DEFAULT_URI
    output: str = "text"
    timeout_s: float = 10.0
    _client: StoreClient | None = field(default=None, repr=False)

    @property
    def as_json(self) -> bool:
        """Whether output is JSON (``-o json`` or ``--json``)."""
        return self.output == "json"

    def client(self) -> StoreClient:
        """The store's client, made on first use (a bad URI is an error naming it then)."""
        if self._client is None:
            self._client = StoreClient(
                self.uri, retry_timeout_s=self.timeout_s, call_timeout_s=self.timeout_s
            )
        return self._client

    def close(self) -> None:
        """Closes the client, if one was made."""
        if self._client is not None:
            self._client.close()

    def emit(self, value: Any, text: str, note: str = "") -> None:
        """Prints ``value`` as one line of JSON, or ``text`` for people (``note`` on stderr)."""
        if self.as_json:
            click.echo(json.dumps(value, sort_keys=True))
            return
        if text:
            click.echo(text)
        if note:
            click.echo(note, err=True)


@dataclass(frozen=True)
class Shown:
    """What a command shows: ``value`` with ``-o json``, else ``text`` (and ``note`` on stderr).

    A note is for people only, such as "(no scopes)", so that text on
    stdout stays one item a line.
    """

    value: Any
    text: str
    note: str = ""


class Failure(click.ClickException):
    """A command failed: ``message`` on stderr, exit with ``exit_code``."""

    def __init__(self, message: str, exit_code: int, kind: str = "Error"):
        super().__init__(message)
        self.exit_code = exit_code
        self.kind = kind


def failure_of(error: TidemarkError, uri: str) -> Failure:
    """The failure a domain error ends a command with: its first line and its exit code."""
    code = next((c for t, c in EXIT_CODES if isinstance(error, t)), 1)
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    base = uri.partition("?")[0]
    if isinstance(error, StoreUnavailableError) and repr(base) not in message:
        message = f"store {base!r} unavailable: {message}"
    return Failure(message, code, type(error).__name__)


def _settings_option(name: str) -> Any:
    """A callback that puts a given option's value into the command's :class:`Settings`."""

    def put(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None and value is not False:
            setattr(ctx.ensure_object(Settings), name, "json" if value is True else value)

    return put


def common_options() -> list[click.Parameter]:
    """``--uri``, ``--timeout``, ``-o/--output`` and ``--json``: fresh ones for one command."""
    return [
        click.Option(
            ["--uri"],
            envvar="TIDEMARK_URI",
            expose_value=False,
            callback=_settings_option("uri"),
            help=(
                f"The store (default: $TIDEMARK_URI, else {DEFAULT_URI}); "
                "credentials in its query: ?token_file=...&tls_ca_file=..."
            ),
        ),
        click.Option(
            ["-o", "--output"],
            type=click.Choice(["text", "json"]),
            expose_value=False,
            callback=_settings_option("output"),
            help="text for people (the default), json for scripts.",
        ),
        click.Option(
            ["--json"],
            is_flag=True,
            default=None,
            expose_value=False,
            callback=_settings_option("output"),
            help="Same as -o json.",
        ),
        click.Option(
            ["--timeout"],
            type=click.FloatRange(min=0.1),
            expose_value=False,
            callback=_settings_option("timeout_s"),
            help="Seconds to keep trying an unreachable store, and per call (default 10).",
        ),
    ]


class TidemarkctlCommand(click.Command):
    """A command that takes the common options and prints the :class:`Shown` it returns.

    A domain error raised by the command ends it as a :class:`Failure`.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.params.extend(common_options())

    def invoke(self, ctx: click.Context) -> Any:
        """Runs the command and prints what it shows."""
        settings = ctx.ensure_object(Settings)
        try:
            shown = super().invoke(ctx)
        except TidemarkError as error:
            raise failure_of(error, settings.uri) from None
        if isinstance(shown, Shown):
            settings.emit(shown.value, shown.text, shown.note)
        return shown


class TidemarkctlGroup(click.Group):
    """A group whose commands are :class:`TidemarkctlCommand` and subgroups its own kind."""

    command_class = TidemarkctlCommand


TidemarkctlGroup.group_class = TidemarkctlGroup


def asks_for_json(args: Sequence[str]) -> bool:
    """Whether a command line asks for JSON output.

    Only for errors raised before the options are parsed (a bad command line
    is reported in JSON too when it asked for JSON).
    """
    words = list(args)
    for index, word in enumerate(words):
        if word in ("--json", "--output=json", "-ojson"):
            return True
        if word in ("-o", "--output") and words[index + 1 : index + 2] == ["json"]:
            return True
    return False


def _report(message: str, exit_code: int, kind: str, as_json: bool) -> NoReturn:
    if as_json:
        document = {"error": message, "exit_code": exit_code, "kind": kind}
        click.echo(json.dumps(document, sort_keys=True), err=True)
    else:
        click.echo(f"{PROG}: error: {message}", err=True)
    sys.exit(exit_code)


class TidemarkctlRoot(TidemarkctlGroup):
    """The ``tidemarkctl`` group itself: the one place that reports errors and exits."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.params.extend(common_options())

    def invoke(self, ctx: click.Context) -> Any:
        """Runs the subcommand; the client it made, if any, is closed afterwards."""
        ctx.call_on_close(ctx.ensure_object(Settings).close)
        return super().invoke(ctx)

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any
    ) -> NoReturn:
        """Runs a command line and exits: 0 done, else the code of its error."""
        argv = list(sys.argv[1:] if args is None else args)
        as_json = asks_for_json(argv)
        extra["standalone_mode"] = False
        try:
            outcome = super().main(argv, prog_name or PROG, **extra)
        except click.exceptions.UsageError as error:
            if isinstance(error, getattr(click.exceptions, "NoArgsIsHelpError", ())):
                error.show()  # no command at all: the help, as click gives it
                sys.exit(error.exit_code)
            where = error.ctx.command_path if error.ctx is not None else PROG
            message = f"{error.format_message()} (see '{where} --help')"
            _report(message, error.exit_code, "UsageError", as_json)
        except Failure as error:
            _report(error.format_message(), error.exit_code, error.kind, as_json)
        except click.ClickException as error:
            _report(error.format_message(), error.exit_code, type(error).__name__, as_json)
        except click.Abort:
            _report("interrupted", EXIT_INTERRUPTED, "Interrupted", as_json)
        sys.exit(outcome if isinstance(outcome, int) else 0)
