"""The coordinator's keyed state, laid out the same in both Python execution modes.

PyFlink keeps a Python function's keyed state differently per mode. In
process mode a ``ValueState`` named ``n`` is a JVM ``ListState<byte[]>``
named ``python-state-n`` holding one value in PyFlink's own encoding; in
thread mode it is a JVM ``ValueState`` named ``n`` of the declared type.
So a savepoint of one mode restored in the other finds the other's state
empty, and the source would silently read its streams again from the start.

Here the coordinator's three values (the frontier, the epoch number, the
next epoch's time) are always the process-mode layout: process mode
declares them as PyFlink does; thread mode declares the JVM list state by
its process-mode name and encodes each value as process mode does (a
string: its UTF-8 length as a big-endian int32, then the bytes; a long:
big-endian int64). Savepoints then restore in either mode, whichever wrote
them, including those of earlier versions (which ran in process mode).
"""

from __future__ import annotations

import struct
from typing import Any

from pyflink.common import Types
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

from flink_adapter.python_mode import THREAD

__all__ = [
    "CoordinatorState",
    "decode_long",
    "decode_string",
    "encode_long",
    "encode_string",
]

#: PyFlink's process mode names a Python function's state this way in the JVM.
PROCESS_MODE_PREFIX = "python-state-"
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def encode_string(value: str) -> bytes:
    """``value`` as PyFlink's process mode stores a ``Types.STRING()`` state value."""
    data = value.encode()
    return _INT32.pack(len(data)) + data


def decode_string(data: bytes) -> str:
    """The string :func:`encode_string` encoded."""
    (length,) = _INT32.unpack_from(data)
    return data[_INT32.size : _INT32.size + length].decode()


def encode_long(value: int) -> bytes:
    """``value`` as PyFlink's process mode stores a ``Types.LONG()`` state value."""
    return _INT64.pack(value)


def decode_long(data: bytes) -> int:
    """The long :func:`encode_long` encoded."""
    return int(_INT64.unpack_from(data)[0])


class _ProcessModeValue:
    """A value state in thread mode, kept where and as process mode keeps it."""

    def __init__(self, runtime_context: Any, name: str, encode: Any, decode: Any):
        descriptor = ListStateDescriptor(
            PROCESS_MODE_PREFIX + name, Types.PRIMITIVE_ARRAY(Types.BYTE())
        )
        # The JVM's ListState<byte[]> itself: PyFlink's thread-mode converters would hand it
        # tuples of ints for byte arrays, which the state's serializer cannot take.
        self._state = runtime_context.get_list_state(descriptor)._state
        self._encode, self._decode = encode, decode

    def value(self) -> Any:
        """The value, or None when none was stored."""
        for element in self._state.get() or ():
            return self._decode(bytes(element))
        return None

    def update(self, value: Any) -> None:
        """Stores ``value``."""
        self._state.update([self._encode(value)])


class CoordinatorState:
    """The coordinator's frontier (JSON), epoch number and next epoch time, in keyed state."""

    def __init__(self, runtime_context: Any, mode: str):
        if mode == THREAD:
            self.frontier = _ProcessModeValue(
                runtime_context, "tidemark-frontier", encode_string, decode_string
            )
            self.epoch = _ProcessModeValue(
                runtime_context, "tidemark-epoch", encode_long, decode_long
            )
            self.next_epoch_at = _ProcessModeValue(
                runtime_context, "tidemark-next-epoch-at", encode_long, decode_long
            )
            return
        self.frontier = runtime_context.get_state(
            ValueStateDescriptor("tidemark-frontier", Types.STRING())
        )
        self.epoch = runtime_context.get_state(ValueStateDescriptor("tidemark-epoch", Types.LONG()))
        self.next_epoch_at = runtime_context.get_state(
            ValueStateDescriptor("tidemark-next-epoch-at", Types.LONG())
        )
