"""The on-disk and on-wire frame of one event.

A frame is a 16-byte header followed by a body::

    header: u32 body length | u32 crc32 of (time, body) | i64 ingestion time ms
    body:   u16 routing key length | routing key (UTF-8) | payload

little-endian; an empty routing key stands for none. The store writes
frames to a segment's data file and serves them unchanged, so offsets are
byte positions of frames. The checksum lets recovery cut a torn tail and
lets readers detect corruption.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from connector.errors import DataLossError, InvalidArgumentError

__all__ = [
    "HEADER",
    "MAX_ROUTING_KEY_BYTES",
    "CorruptFrameError",
    "Frame",
    "Intact",
    "FrameColumns",
    "decode_answer",
    "decode_columns",
    "encode_frames",
    "intact_prefix",
    "iter_frames",
    "lands_on_boundary",
    "scan_end",
    "whole_frames",
]

HEADER = struct.Struct("<IIq")
#: Where a frame's checksummed bytes start: its time and body follow the length and checksum.
_CHECKED_FROM = 8
_TIME = struct.Struct("<q")
_KEY_LENGTH = struct.Struct("<H")
_NO_KEY = _KEY_LENGTH.pack(0)
#: The longest routing key, in UTF-8 bytes.
MAX_ROUTING_KEY_BYTES = 0xFFFF


class CorruptFrameError(DataLossError):
    """A frame's length or checksum does not match its bytes (``offset`` says where it starts)."""


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
        msg = (
            f"routing key {routing_key[:40]!r}... has {len(encoded)} bytes, "
            f"over {MAX_ROUTING_KEY_BYTES}"
        )
        raise InvalidArgumentError(msg)
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
        append(
            pack(
                len(prefix) + len(payload), crc32(payload, crc32(prefix, time_crc)), ingestion_time
            )
        )
        append(prefix)
        append(payload)
    return b"".join(parts)


class FrameColumns(NamedTuple):
    """The frames of one read as parallel lists, for columnar consumers (Arrow batches).

    Entry ``i`` of every list describes the same frame; ``ends[i]`` is where
    frame ``i`` ends, which is where frame ``i + 1`` starts.
    """

    offsets: list[int]
    ends: list[int]
    ingestion_times: list[int]
    routing_keys: list[str | None]
    payloads: list[bytes]


def decode_columns(data: bytes, base_offset: int = 0, verify: bool = True) -> FrameColumns:
    """Decodes every frame of ``data``, which must hold whole frames only, into columns.

    ``base_offset`` is the stream offset of ``data[0]``. With ``verify`` each
    frame's checksum is checked. Routing keys are decoded once per distinct key.

    Raises:
        CorruptFrameError: a frame is truncated or fails its checksum.
    """
    if type(data) is not bytes:  # slices of bytes are bytes: payloads are copied once
        data = bytes(data)
    unpack = HEADER.unpack_from
    size = HEADER.size
    crc32 = zlib.crc32
    offsets: list[int] = []
    ends: list[int] = []
    times: list[int] = []
    keys: list[str | None] = []
    payloads: list[bytes] = []
    decoded_keys: dict[bytes, str] = {}
    end = len(data)
    pos = 0
    while pos < end:
        if end - pos < size:
            raise _corrupt(base_offset + pos, _cut_short(end - pos))
        length, crc, time_ms = unpack(data, pos)
        start = pos + size
        stop = start + length
        if stop > end or length < 2:
            raise _corrupt(base_offset + pos, _overlong(length, end - start))
        if verify and crc32(data[pos + _CHECKED_FROM : stop]) != crc:
            raise _corrupt(base_offset + pos, _BAD_CHECKSUM)
        key_length = data[start] | (data[start + 1] << 8)
        body = start + 2 + key_length
        if key_length:
            raw_key = data[start + 2 : body]
            key = decoded_keys.get(raw_key)
            if key is None:
                key = decoded_keys[raw_key] = raw_key.decode()
        else:
            key = None
        offsets.append(base_offset + pos)
        ends.append(base_offset + stop)
        times.append(time_ms)
        keys.append(key)
        payloads.append(data[body:stop])
        pos = stop
    return FrameColumns(offsets, ends, times, keys, payloads)


def decode_answer(data: bytes, base_offset: int, checksum: int | None) -> FrameColumns:
    """Decodes a store's answer (see :func:`decode_columns`), its frames checked once end to end.

    ``checksum`` is the store's CRC-32 of ``data``, sent once the store
    checked every frame of it (None: it did not say). When it matches, one
    CRC over the whole answer stands for the frames' own; otherwise every
    frame is checked, so a damaged one is named by its offset.

    Raises:
        CorruptFrameError: a frame is truncated or fails its checksum, or
            the answer fails ``checksum`` with every frame intact (damaged on
            its way: offset ``base_offset``).
    """
    if checksum is not None and zlib.crc32(data) == checksum:
        return decode_columns(data, base_offset, verify=False)
    columns = decode_columns(data, base_offset)
    if checksum is not None:
        msg = (
            f"the store's answer from offset {base_offset} ({len(data)} bytes) fails its "
            "checksum: damaged on its way from the store"
        )
        raise CorruptFrameError(msg, offset=base_offset)
    return columns


_BAD_CHECKSUM = "fails its checksum"


def _cut_short(remaining: int) -> str:
    return f"has a header cut short ({remaining} of {HEADER.size} bytes)"


def _overlong(length: int, remaining: int) -> str:
    return f"claims {length} bytes, {remaining} remain"


def _corrupt(offset: int, reason: str) -> CorruptFrameError:
    return CorruptFrameError(f"the frame at offset {offset} {reason}", offset=offset)


class Intact(NamedTuple):
    """The whole, intact frames at the start of some bytes: their length and count.

    ``reason`` says why the frame after them fails (None: there is none).
    """

    length: int
    frames: int
    reason: str | None


def intact_prefix(data: bytes, base_offset: int = 0) -> Intact:
    """The whole frames at the start of ``data`` that pass their checksums (see :class:`Intact`).

    ``base_offset`` is where ``data`` starts in its segment (for nothing but
    the reader's sake: the failing frame starts at ``length``).
    """
    if type(data) is not bytes:  # zlib checks a bytes slice several times faster than a view's
        data = bytes(data)
    unpack = HEADER.unpack_from
    size = HEADER.size
    crc32 = zlib.crc32
    end = len(data)
    pos = 0
    frames = 0
    while pos < end:
        if end - pos < size:
            return Intact(pos, frames, _cut_short(end - pos))
        length, crc, _ = unpack(data, pos)
        stop = pos + size + length
        if stop > end or length < 2:
            return Intact(pos, frames, _overlong(length, end - pos - size))
        # The checksum covers the time and the body: the frame after its length and checksum.
        if crc32(data[pos + _CHECKED_FROM : stop]) != crc:
            return Intact(pos, frames, _BAD_CHECKSUM)
        pos = stop
        frames += 1
    return Intact(pos, frames, None)


def iter_frames(data: bytes, base_offset: int = 0, verify: bool = True) -> Iterator[Frame]:
    """Decodes every frame of ``data``, which must hold whole frames only.

    Decodes all of ``data`` before yielding the first frame (see
    :func:`decode_columns`), so a corrupt frame anywhere raises before any is seen.

    Raises:
        CorruptFrameError: a frame is truncated or fails its checksum.
    """
    columns = decode_columns(data, base_offset, verify)
    for offset, end, time_ms, key, payload in zip(
        columns.offsets,
        columns.ends,
        columns.ingestion_times,
        columns.routing_keys,
        columns.payloads,
        strict=True,
    ):
        yield Frame(offset, time_ms, payload, key, end)


# --- scanning frame headers (no payload decoded, no checksum checked) ------------

#: Reads a segment's bytes between two offsets.
ReadBytes = Callable[[int, int], bytes]


def whole_frames(chunk: bytes) -> int:
    """The length of the longest prefix of ``chunk`` made of whole frames (headers only read)."""
    pos = 0
    while len(chunk) - pos >= HEADER.size:
        size = HEADER.size + HEADER.unpack_from(chunk, pos)[0]
        if pos + size > len(chunk):
            break
        pos += size
    return pos


def scan_end(read: ReadBytes, offset: int, limit: int) -> int:
    """The end of the last whole frame in ``(offset, limit]``, or of the first frame.

    ``offset`` is a frame boundary; a first frame longer than ``limit - offset``
    is returned whole (its end lies past ``limit``).
    """
    stop = offset + whole_frames(read(offset, limit))
    if stop == offset:
        header = read(offset, offset + HEADER.size)
        stop = offset + HEADER.size + HEADER.unpack(header)[0]
    return stop


def lands_on_boundary(read: ReadBytes, start: int, offset: int, window: int) -> bool:
    """Whether walking frames from the boundary ``start`` lands exactly on ``offset``.

    Reads ``window`` bytes at a time and steps over a frame that crosses a
    window's end by its header alone, so the bytes read are bounded by
    ``offset - start`` plus one header, and by ``window`` plus one header when
    every frame boundary between ``start`` and ``offset`` lies less than
    ``window`` bytes after the previous known one.
    """
    pos = start
    while pos < offset:
        chunk = read(pos, min(offset, pos + window))
        whole = whole_frames(chunk)
        pos += whole
        if pos >= offset:
            break
        # The next frame crosses the window's end: step over it by its header alone.
        header = chunk[whole : whole + HEADER.size]
        if len(header) < HEADER.size:
            header = read(pos, pos + HEADER.size)
            if len(header) < HEADER.size:
                return False
        pos += HEADER.size + HEADER.unpack(header)[0]
    return pos == offset
