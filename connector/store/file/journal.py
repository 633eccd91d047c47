"""The store's metadata journal: an append-only file of checksummed JSON records.

Every change to metadata (scopes, streams, scaling, commits of appends, idle
ticks, seals, state values) is one record. Records are written in batches and
made durable with one fsync (group commit). At start the journal is replayed
(:func:`scan` reads it). A crash in the middle of a write leaves a *torn
tail*: after the last intact record, fewer bytes than a header, or one
record cut short (its length runs past the end of the file and the bytes
that remain do not match its checksum). Nothing of it was acknowledged, and
replay cuts it off. Anything else that fails (a record that fails its
checksum with intact records after it, a whole last record that fails it, a
stretch of zeros) is damage a crash cannot explain: replay refuses it with
:class:`~connector.errors.DataDirDamagedError`, naming the file, the offset
and what follows, and cuts nothing. :meth:`Journal.rewrite` replaces the
whole file with fewer records (compaction) through a new file renamed over
the old one, so a crash leaves either the old journal or the new one.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from connector.errors import DataDirDamagedError, quoted
from connector.store.file.bit_flips import flipped_bit
from connector.store.file.disk import write_all

__all__ = [
    "Damage",
    "Journal",
    "JournalScan",
    "Mended",
    "body",
    "damage_message",
    "mend",
    "scan",
    "scan_bytes",
]

_HEADER = struct.Struct("<II")
#: How every record's body starts (its kind comes first): where a scan looks for records
#: again after a damaged stretch.
_RECORD_START = b'{"op":'
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Damage:
    """A stretch ``[start, end)`` of a journal holding no intact record, and why the first fails."""

    start: int
    end: int
    reason: str


@dataclass(frozen=True)
class JournalScan:
    """What a journal's bytes hold: its intact records and the damaged stretches between them.

    ``records`` are ``(start, end)`` byte ranges of intact records, in order.
    ``torn`` is True when the only damage is a torn tail (see the module
    docstring): a crash's doing, which replay cuts.
    """

    size: int
    records: list[tuple[int, int]]
    damage: list[Damage]
    torn: bool

    @property
    def intact_end(self) -> int:
        """Where the intact records before the first damage end (the file's size if none)."""
        return self.damage[0].start if self.damage else self.size

    def records_after(self, offset: int) -> list[tuple[int, int]]:
        """The intact records that start at or after ``offset``."""
        return [r for r in self.records if r[0] >= offset]


def _encode(record: Mapping[str, Any]) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode()
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


def _failure(data: bytes, pos: int) -> str | None:
    """Why the record at ``pos`` is not intact; None when it is (its checksum holds)."""
    remaining = len(data) - pos
    if remaining < _HEADER.size:
        return f"has a header cut short ({remaining} of {_HEADER.size} bytes)"
    length, crc = _HEADER.unpack_from(data, pos)
    if length < 2:  # the shortest JSON object is "{}"
        return f"claims {length} bytes, too few for a record"
    if pos + _HEADER.size + length > len(data):
        return f"claims {length} bytes, {remaining - _HEADER.size} remain"
    start = pos + _HEADER.size
    if zlib.crc32(memoryview(data)[start : start + length]) != crc:
        return "fails its checksum"
    return None


def _next_record(data: bytes, after: int) -> int | None:
    """Where the first intact record starting after ``after`` starts; None when none does."""
    look = after + 1 + _HEADER.size
    while True:
        found = data.find(_RECORD_START, look)
        if found < 0:
            return None
        if _failure(data, found - _HEADER.size) is None:
            return found - _HEADER.size
        look = found + 1


def _torn(data: bytes, pos: int) -> bool:
    """Whether the bytes from ``pos`` to the end are one record cut short by a crash."""
    remaining = len(data) - pos
    if remaining < _HEADER.size:
        return True
    length, crc = _HEADER.unpack_from(data, pos)
    # Its length runs past the end, and what remains is not its whole body with a damaged
    # length (whose checksum would hold).
    return length > remaining - _HEADER.size and zlib.crc32(data[pos + _HEADER.size :]) != crc


def scan_bytes(data: bytes) -> JournalScan:
    """The intact records and damaged stretches of a journal's bytes (checksums only, no JSON)."""
    records: list[tuple[int, int]] = []
    damage: list[Damage] = []
    pos = 0
    while pos < len(data):
        reason = _failure(data, pos)
        if reason is None:
            end = pos + _HEADER.size + _HEADER.unpack_from(data, pos)[0]
            records.append((pos, end))
            pos = end
            continue
        resumed = _next_record(data, pos)
        end = len(data) if resumed is None else resumed
        if not data[pos:end].strip(b"\0"):
            reason = f"is {end - pos} zero bytes"
        damage.append(Damage(pos, end, reason))
        pos = end
    torn = len(damage) == 1 and damage[0].end == len(data) and _torn(data, damage[0].start)
    return JournalScan(len(data), records, damage, torn)


def scan(path: str) -> tuple[bytes, JournalScan]:
    """The journal at ``path`` (its bytes) and what they hold (see :func:`scan_bytes`)."""
    with open(path, "rb") as file:
        data = file.read()
    return data, scan_bytes(data)


def body(data: bytes, record: tuple[int, int]) -> dict[str, Any]:
    """The JSON object an intact record holds."""
    return json.loads(data[record[0] + _HEADER.size : record[1]])


@dataclass(frozen=True)
class Mended:
    """A damaged record made whole again: where it lies, its JSON object, and what was wrong."""

    start: int
    end: int
    body: dict[str, Any]
    flip: str


def mend(data: bytes, damage: Damage) -> Mended | None:
    """The record at the start of ``damage`` with one flipped bit put back, if that makes it whole.

    The bit may be in the length (the record then ends where ``damage``
    does), the checksum or the body; the mended record must fill ``damage``
    exactly and hold a JSON object. None when no single bit does it.
    """
    pos, start = damage.start, damage.start + _HEADER.size
    if damage.end - pos < _HEADER.size:
        return None
    length, crc = _HEADER.unpack_from(data, pos)
    if start + length != damage.end:  # the length is what was flipped, or nothing mends it
        flipped = damage.end - start
        if (length ^ flipped).bit_count() != 1 or zlib.crc32(data[start : damage.end]) != crc:
            return None
        return _json(
            data[start : damage.end], pos, damage.end, f"a bit of its length at byte {pos}"
        )
    found = zlib.crc32(data[start : damage.end])
    if (found ^ crc).bit_count() == 1:
        return _json(data[start : damage.end], pos, damage.end, "a bit of its checksum")
    bit = flipped_bit(data[start : damage.end], crc)
    if bit is None:
        return None
    fixed = bytearray(data[start : damage.end])
    fixed[bit // 8] ^= 1 << (bit % 8)
    return _json(bytes(fixed), pos, damage.end, f"bit {bit % 8} of byte {start + bit // 8}")


def _json(record: bytes, start: int, end: int, flip: str) -> Mended | None:
    try:
        decoded = json.loads(record)
    except ValueError:
        return None
    return Mended(start, end, decoded, flip) if isinstance(decoded, dict) else None


def damage_message(path: str, found: JournalScan) -> str:
    """One line naming a journal's first damage, what follows it, and what to do."""
    first = found.damage[0]
    after = found.records_after(first.end)
    if after:
        follows = (
            f"{len(after)} intact records ({found.size - first.end} bytes) follow it "
            f"from byte {first.end}"
        )
    else:
        follows = "nothing follows it, and it is no write cut short by a crash"
    folder = os.path.dirname(path) or "."
    return (
        f"journal {quoted(path)} is damaged at byte {first.start}: the record there "
        f"{first.reason}; {follows}. Nothing was cut. See what is damaged and what a "
        f"repair keeps with: tidemarkctl data-dir check {quoted(folder)}"
    )


class Journal:
    """An append-only record log in one file."""

    def __init__(self, path: str, weigh: Callable[[Mapping[str, Any]], int] = lambda _: 1):
        self._path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[bytes] = []
        self._pending_weight = 0
        self._size = os.fstat(self._fd).st_size
        self._weigh = weigh
        #: How many records the file holds, each counted as ``weigh`` says (one by default;
        #: known after :meth:`replay`).
        self.records = 0

    def replay(self) -> Iterator[dict[str, Any]]:
        """Yields every record in order, then cuts a torn tail off the file.

        Raises:
            DataDirDamagedError: the journal is damaged beyond a torn tail (see
                the module docstring), before any record is yielded; nothing
                is cut.
        """
        data, found = scan(self._path)
        if found.damage and not found.torn:
            first = found.damage[0]
            raise DataDirDamagedError(damage_message(self._path, found), self._path, first.start)
        self.records = 0
        for record in found.records:
            try:
                decoded = body(data, record)
            except ValueError:  # its checksum holds: written so (never by this store)
                msg = (
                    f"journal {quoted(self._path)}: the record at byte {record[0]} passes its "
                    "checksum but is not JSON. Nothing was cut."
                )
                raise DataDirDamagedError(msg, self._path, record[0]) from None
            yield decoded
            self.records += self._weigh(decoded)
        pos = found.intact_end
        if pos != len(data):
            _log.warning("journal %s: cutting a torn tail of %d bytes", self._path, len(data) - pos)
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self._size = pos

    def add(self, record: dict[str, Any]) -> None:
        """Queues a record; it is durable after the next :meth:`sync`."""
        self._pending.append(_encode(record))
        self._pending_weight += self._weigh(record)

    def sync(self) -> None:
        """Writes the queued records and fsyncs the file: all of them durable, or none.

        Raises:
            OSError: the write or the fsync failed; the queued records are dropped
                and the file is cut back to its last durable record, so the next
                records never follow torn bytes.
        """
        if not self._pending:
            return
        data = b"".join(self._pending)
        count = self._pending_weight
        self._pending.clear()
        self._pending_weight = 0
        try:
            write_all(self._fd, data, self._size)
            os.fdatasync(self._fd)
        except OSError:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)
        self.records += count

    def rewrite(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Replaces the journal's content by ``records``, atomically; returns its new size.

        The new journal is written beside the old one, fsynced and renamed over
        it (then the folder is fsynced), so a crash leaves either whole. Call it
        with nothing queued.

        Raises:
            OSError: the new journal could not be written; the old one is untouched.
        """
        assert not self._pending, "rewrite with records queued"
        temporary = self._path + ".compacting"
        records = list(records)
        data = b"".join(_encode(record) for record in records)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data, 0)
            os.fsync(fd)
        except OSError:
            os.unlink(temporary)  # a failed attempt leaves no file behind
            raise
        finally:
            os.close(fd)
        os.replace(temporary, self._path)
        folder = os.open(os.path.dirname(self._path) or ".", os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        os.close(self._fd)
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = len(data)
        self.records = sum(self._weigh(record) for record in records)
        return self._size

    @property
    def path(self) -> str:
        """The journal's file."""
        return self._path

    @property
    def has_pending(self) -> bool:
        """Whether records are queued for the next :meth:`sync`."""
        return bool(self._pending)

    @property
    def size(self) -> int:
        """The journal's durable size in bytes."""
        return self._size

    def discard(self) -> None:
        """Drops the queued records (their group failed before the journal was written)."""
        self._pending.clear()
        self._pending_weight = 0

    def close(self) -> None:
        """Closes the file; closing twice is harmless."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
