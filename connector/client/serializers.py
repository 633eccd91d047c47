"""Serializers: how events turn into bytes and back."""

from __future__ import annotations

import json
from typing import Any, Generic, Protocol, TypeVar

from connector.errors import InvalidArgumentError

__all__ = [
    "SERIALIZER_NAMES",
    "BytesSerializer",
    "JsonSerializer",
    "Serializer",
    "StringSerializer",
    "serializer_named",
]

T = TypeVar("T")


class Serializer(Protocol, Generic[T]):
    """Turns events of type ``T`` into bytes and back."""

    def serialize(self, value: T) -> bytes:
        """The bytes stored for ``value``."""
        ...

    def deserialize(self, data: bytes) -> T:
        """The value ``data`` stands for."""
        ...


class BytesSerializer:
    """Events are bytes, stored as they are."""

    name = "bytes"

    def serialize(self, value: bytes) -> bytes:
        """Returns ``value``; raises InvalidArgumentError for anything but bytes."""
        if not isinstance(value, (bytes, bytearray, memoryview)):
            msg = f"BytesSerializer takes bytes, got {type(value).__name__}: {value!r:.80}"
            raise InvalidArgumentError(msg)
        return bytes(value)

    def deserialize(self, data: bytes) -> bytes:
        """Returns ``data``."""
        return data

    def __repr__(self) -> str:
        return "BytesSerializer()"


class StringSerializer:
    """Events are strings, stored as UTF-8."""

    name = "string"

    def serialize(self, value: str) -> bytes:
        """UTF-8 bytes of ``value``."""
        if not isinstance(value, str):
            msg = f"StringSerializer takes str, got {type(value).__name__}: {value!r:.80}"
            raise InvalidArgumentError(msg)
        return value.encode()

    def deserialize(self, data: bytes) -> str:
        """The string ``data`` encodes."""
        return data.decode()

    def __repr__(self) -> str:
        return "StringSerializer()"


class JsonSerializer:
    """Events are JSON values, stored as compact UTF-8 JSON."""

    name = "json"

    def serialize(self, value: Any) -> bytes:
        """Compact JSON of ``value``."""
        try:
            return json.dumps(value, separators=(",", ":")).encode()
        except TypeError as error:
            msg = f"JsonSerializer cannot encode {value!r:.80}: {error}"
            raise InvalidArgumentError(msg) from None

    def deserialize(self, data: bytes) -> Any:
        """The JSON value ``data`` encodes."""
        return json.loads(data)

    def __repr__(self) -> str:
        return "JsonSerializer()"


_BY_NAME: dict[str, type[Serializer[Any]]] = {
    cls.name: cls for cls in (BytesSerializer, StringSerializer, JsonSerializer)
}

#: The names :func:`serializer_named` takes, in the order documented.
SERIALIZER_NAMES: tuple[str, ...] = tuple(_BY_NAME)


def serializer_named(name: str) -> Serializer[Any]:
    """The serializer called ``name``, one of :data:`SERIALIZER_NAMES` (bytes, string, json)."""
    try:
        return _BY_NAME[name]()
    except KeyError:
        msg = f"unknown serializer {name!r}: use one of {sorted(_BY_NAME)}"
        raise InvalidArgumentError(msg) from None
