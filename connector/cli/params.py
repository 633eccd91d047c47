"""The command line's value types: names of streams and of things in a scope."""

from __future__ import annotations

from typing import Any

import click

from connector.errors import InvalidArgumentError
from connector.names import StreamId

__all__ = ["SCOPED_NAME", "STREAM_NAME"]


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
