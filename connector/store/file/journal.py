"""The store's metadata journal: an append-only file of checksummed JSON records.

Every change to metadata (scopes, streams, scaling, commits of appends, idle
ticks, seals, state values) is one record. Records are written in batches and
made durable with one fsync (group commit). At start the journal is replayed;
a torn or corrupt tail is cut off. :meth:`Journal.rewrite` replaces the whole
file with fewer records (compaction) through a new file renamed
over the old one, so a crash leaves either the old journal or the new one.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from connector.store.file.disk import write_all

__all__ = ["Journal"]

_HEADER = struct.Struct("<II")
_log = logging.getLogger(__name__)


def _encode(record: Mapping[str, Any]) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode()
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


class Journal:
    """An append-only record log in one file."""

    def __init__(self, path: str):
        self._path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[bytes] = []
        self._size = os.fstat(self._fd).st_size
        #: How many records the file holds (known after :meth:`replay`).
        self.records = 0

    def replay(self) -> Iterator[dict[str, Any]]:
        """Yields every intact record in order and cuts any torn tail off the file."""
        with open(self._path, "rb") as file:
            data = file.read()
        pos = 0
        self.records = 0
        while len(data) - pos >= _HEADER.size:
            length, crc = _HEADER.unpack_from(data, pos)
            body = data[pos + _HEADER.size : pos + _HEADER.size + length]
            if len(body) != length or zlib.crc32(body) != crc:
                break
            yield json.loads(body)
            pos += _HEADER.size + length
            self.records += 1
        if pos != len(data):
            _log.warning("journal %s: cutting a torn tail of %d bytes", self._path, len(data) - pos)
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self._size = pos

    def add(self, record: dict[str, Any]) -> None:
        """Queues a record; it is durable after the next :meth:`sync`."""
        self._pending.append(_encode(record))

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
        count = len(self._pending)
        self._pending.clear()
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
        self.records = len(records)
        return self._size

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

    def close(self) -> None:
        """Closes the file; closing twice is harmless."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
