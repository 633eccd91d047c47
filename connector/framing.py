"""The on-disk and on-wire frame of one event.

A frame is a 16-byte header followed by a body::

    header: u32 body length | u32 crc32 of (time, body) | i64 ingestion time ms
    body:   u16 routing key length | routing key (UTF-8) | payload

little-endian; an empty routing key stands for none. The store writes frames to a segment's data file and serves
them unchanged, so offsets are byte positions of frames. The checksum lets
recovery cut a torn tail and lets readers detect corruption.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from connector.errors import TidemarkError

__all__ = [
    "HEADER",
    "MAX_ROUTING_KEY_BYTES",
    "CorruptFrameError",
    "Frame",
    "encode_frames",
    "iter_frames",
]

HEADER = struct.Struct("<IIq")
_TIME = struct.Struct("<q")
_KEY_LENGTH = struct.Struct("<H")
_NO_KEY = _KEY_LENGTH.pack(0)
#: The longest routing key, in UTF-8 bytes.
MAX_ROUTING_KEY_BYTES = 0xFFFF


class CorruptFrameError(TidemarkError):
    """A frame's length or checksum does not match its bytes."""


class Frame(NamedTuple):
    """One decoded event: where it starts and ends, when it was ingested, its key and payload."""

    offset: int
    ingestion_time: int
    payload: bytes
    routing_key: str | None = None
    end: int = 0


def _key_prefix(routing_key: str | None) -> bytes:
    if not routing_key:
        return _NO_KEY
    encoded = routing_key.encode()
    if len(encoded) > MAX_ROUTING_KEY_BYTES:
        msg = f"routing key {routing_key[:40]!r}... has {len(encoded)} bytes, over {MAX_ROUTING_KEY_BYTES}"
        raise CorruptFrameError(msg)
    return _KEY_LENGTH.pack(len(encoded)) + encoded


def encode_frames(
    payloads: Sequence[bytes], ingestion_time: int, routing_keys: Sequence[str | None] | None = None
) -> bytes:
    """Frames ``payloads`` (with their routing keys) that share one ingestion time."""
    time_crc = zlib.crc32(_TIME.pack(ingestion_time))
    pack = HEADER.pack
    crc32 = zlib.crc32
    parts: list[bytes] = []
    append = parts.append
    keys: Iterable[str | None] = routing_keys if routing_keys else (None,) * len(payloads)
    for payload, key in zip(payloads, keys, strict=True):
        prefix = _key_prefix(key)
        append(pack(len(prefix) + len(payload), crc32(payload, crc32(prefix, time_crc)), ingestion_time))
        append(prefix)
        append(payload)
    return b"".join(parts)


def iter_frames(data: bytes, base_offset: int = 0, verify: bool = True) -> Iterator[Frame]:
    """Decodes every frame of ``data``, which must hold whole frames only.

    Raises:
        CorruptFrameError: a frame is truncated or fails its checksum.
    """
    if type(data) is not bytes:  # slices of bytes are bytes: payloads are copied once
        data = bytes(data)
    unpack = HEADER.unpack_from
    size = HEADER.size
    crc32 = zlib.crc32
    pack_time = _TIME.pack
    end = len(data)
    pos = 0
    # The frames of one append share an ingestion time: checksum it once per run.
    last_time: int | None = None
    time_crc = 0
    while pos < end:
        if end - pos < size:
            msg = f"truncated frame header at offset {base_offset + pos}"
            raise CorruptFrameError(msg)
        length, crc, time_ms = unpack(data, pos)
        start = pos + size
        stop = start + length
        if stop > end:
            msg = f"frame at offset {base_offset + pos} claims {length} bytes, {end - start} remain"
            raise CorruptFrameError(msg)
        body = data[start:stop]
        if verify:
            if time_ms != last_time:
                last_time = time_ms
                time_crc = crc32(pack_time(time_ms))
            if crc32(body, time_crc) != crc:
                msg = f"checksum mismatch in frame at offset {base_offset + pos}"
                raise CorruptFrameError(msg)
        key_length = body[0] | (body[1] << 8)
        key = body[2 : 2 + key_length].decode() if key_length else None
        yield Frame(base_offset + pos, time_ms, body[2 + key_length :], key, base_offset + stop)
        pos = stop

