"""The command line's value types (names of streams and of things in a scope) and shared options."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

import click

from connector.cli.app import Failure
from connector.errors import InvalidArgumentError
from connector.names import StreamId

__all__ = ["SCOPED_NAME", "STREAM_NAME", "plot_options", "plotting"]

Command = TypeVar("Command", bound=Callable[..., Any])


class _StreamName(click.ParamType):
    """``scope/stream``, as a :class:`StreamId`."""

    name = "SCOPE/STREAM"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The stream id ``value`` names; a malformed one fails naming it."""
        if isinstance(value, StreamId):
            return value
        try:
            return StreamId.parse(value)
        except InvalidArgumentError as error:
            self.fail(str(error), param, ctx)


class _ScopedName(click.ParamType):
    """``scope/name`` (a reader group), as ``(scope, name)``."""

    name = "SCOPE/NAME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``(scope, name)``; a value of another shape fails naming it."""
        if isinstance(value, tuple):
            return value
        scope, sep, name = str(value).partition("/")
        if not sep or not scope or not name or "/" in name:
            self.fail(f"expected 'scope/name', got {value!r}", param, ctx)
        return scope, name


STREAM_NAME = _StreamName()
SCOPED_NAME = _ScopedName()


def plot_options(command: Command) -> Command:
    """``--plot FILE``, ``--duration S``, ``--interval S``: sample for a while, then draw."""
    options = [
        click.option(
            "--plot",
            "plot_file",
            type=click.Path(dir_okay=False),
            help="Draw a PNG here (an SVG if FILE ends in .svg).",
        ),
        click.option(
            "--duration",
            type=click.FloatRange(min=0),
            default=10.0,
            show_default=True,
            help="With --plot: seconds to sample for.",
        ),
        click.option(
            "--interval",
            type=click.FloatRange(min=0.01),
            default=0.5,
            show_default=True,
            help="With --plot: seconds between samples.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def plotting(module: str) -> ModuleType:
    """Imports the plotting ``module``; a Failure saying how to get matplotlib if it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        msg = f"--plot needs matplotlib (pip install '.[plot]' in a checkout): {error}"
        raise Failure(msg, 1, "ImportError") from None
