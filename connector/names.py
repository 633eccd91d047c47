"""Names of scopes, streams and segments, and their validation."""

from __future__ import annotations

import re
from dataclasses import dataclass

from connector.errors import InvalidArgumentError, quoted

__all__ = ["SegmentId", "StreamId", "state_key_scope", "validate_name"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", re.ASCII)
# ASCII digits, no leading zero: one spelling per segment, so "007" or "٣" is no alias.
_NUMBER = re.compile(r"0|[1-9][0-9]{0,17}", re.ASCII)


def validate_name(kind: str, name: str) -> str:
    """Returns ``name`` if it is a valid scope or stream name, else raises.

    A valid name is 1 to 100 characters of letters, digits, ``_``, ``.`` and
    ``-``, starting with a letter or digit.

    Raises:
        InvalidArgumentError: naming the kind and the bad value.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        msg = (
            f"invalid {kind} name {quoted(name)}: use 1 to 100 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
        raise InvalidArgumentError(msg)
    return name


@dataclass(frozen=True, order=True)
class StreamId:
    """A stream's qualified name, ``scope/stream``."""

    scope: str
    stream: str

    def __post_init__(self) -> None:
        validate_name("scope", self.scope)
        validate_name("stream", self.stream)

    @classmethod
    def parse(cls, text: str) -> StreamId:
        """Parses ``"scope/stream"``."""
        parts = text.split("/") if isinstance(text, str) else []
        if len(parts) != 2:
            msg = f"invalid stream {quoted(text)}: expected 'scope/stream'"
            raise InvalidArgumentError(msg)
        return cls(parts[0], parts[1])

    def segment(self, number: int) -> SegmentId:
        """The id of this stream's segment ``number``."""
        return SegmentId(self.scope, self.stream, number)

    def __str__(self) -> str:
        return f"{self.scope}/{self.stream}"


@dataclass(frozen=True, order=True)
class SegmentId:
    """A segment's qualified name, ``scope/stream/number``."""

    scope: str
    stream: str
    number: int

    @classmethod
    def parse(cls, text: str) -> SegmentId:
        """Parses ``"scope/stream/number"``.

        Raises:
            InvalidArgumentError: when ``text`` is not of that form.
        """
        parts = text.split("/") if isinstance(text, str) else []
        if len(parts) != 3 or not _NUMBER.fullmatch(parts[2]):
            msg = (
                f"invalid segment {quoted(text)}: expected 'scope/stream/number', the number "
                "in ASCII digits without leading zeros"
            )
            raise InvalidArgumentError(msg)
        validate_name("scope", parts[0])
        validate_name("stream", parts[1])
        return cls(parts[0], parts[1], int(parts[2]))

    @property
    def stream_id(self) -> StreamId:
        """The stream this segment belongs to."""
        return StreamId(self.scope, self.stream)

    def __str__(self) -> str:
        return f"{self.scope}/{self.stream}/{self.number}"


def state_key_scope(key: str) -> str | None:
    """The scope a state key belongs to: its second part (``kind/scope/...``).

    Reader groups keep their state under ``readergroup/scope/group``. None for
    a key of another shape, which belongs to no scope.
    """
    parts = key.split("/")
    return parts[1] if len(parts) >= 3 and parts[1] else None
