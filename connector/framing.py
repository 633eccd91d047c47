"""The on-disk and on-wire frame of one event.

A frame is a 16-byte header followed by the payload::

    u32 payload length | u32 crc32 of (time, payload) | i64 ingestion time ms

little-endian. The store writes frames to a segment's data file and serves
them unchanged, so offsets are byte positions of frames. The checksum lets
recovery cut a torn tail and lets readers detect corruption.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from connector.errors import TidemarkError

__all__ = ["HEADER", "CorruptFrameError", "Frame", "encode_frames", "iter_frames", "valid_prefix"]

HEADER = struct.Struct("<IIq")
_TIME = struct.Struct("<q")


class CorruptFrameError(TidemarkError):
    """A frame's length or checksum does not match its bytes."""


class Frame(NamedTuple):
    """One decoded event: where it starts, when it was ingested, its payload."""

    offset: int
    ingestion_time: int
    payload: bytes


def encode_frames(payloads: Iterable[bytes], ingestion_time: int) -> bytes:
    """Frames ``payloads`` that share one ingestion time into one byte string."""
    time_bytes = _TIME.pack(ingestion_time)
    time_crc = zlib.crc32(time_bytes)
    pack = HEADER.pack
    crc32 = zlib.crc32
    parts: list[bytes] = []
    append = parts.append
    for payload in payloads:
        append(pack(len(payload), crc32(payload, time_crc), ingestion_time))
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
        payload = data[start:stop]
        if verify:
            if time_ms != last_time:
                last_time = time_ms
                time_crc = crc32(pack_time(time_ms))
            if crc32(payload, time_crc) != crc:
                msg = f"checksum mismatch in frame at offset {base_offset + pos}"
                raise CorruptFrameError(msg)
        yield Frame(base_offset + pos, time_ms, payload)
        pos = stop


def valid_prefix(data: bytes) -> tuple[int, list[tuple[int, int]]]:
    """Returns the length of the longest prefix of whole, intact frames.

    Also returns ``(end offset, ingestion time)`` of every frame in that prefix,
    which recovery uses to rebuild attributes. Never raises: a torn or corrupt
    frame simply ends the prefix.
    """
    frames: list[tuple[int, int]] = []
    unpack = HEADER.unpack_from
    size = HEADER.size
    end = len(data)
    pos = 0
    while end - pos >= size:
        length, crc, time_ms = unpack(data, pos)
        stop = pos + size + length
        if stop > end or zlib.crc32(data[pos + size : stop], zlib.crc32(_TIME.pack(time_ms))) != crc:
            break
        frames.append((stop, time_ms))
        pos = stop
    return pos, frames
