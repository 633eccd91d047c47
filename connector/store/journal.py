"""The store's metadata journal: an append-only file of checksummed JSON records.

Every change to metadata (scopes, streams, scaling, commits of appends, idle
ticks, seals, state values) is one record. Records are written in batches and
made durable with one fsync (group commit). At start the journal is replayed;
a torn or corrupt tail is cut off.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from connector.store.disk import write_all

__all__ = ["Journal"]

_HEADER = struct.Struct("<II")
_log = logging.getLogger(__name__)


class Journal:
    """An append-only record log in one file."""

    def __init__(self, path: str):
        self._path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[bytes] = []
        self._size = os.fstat(self._fd).st_size

    def replay(self) -> Iterator[dict[str, Any]]:
        """Yields every intact record in order and cuts any torn tail off the file."""
        with open(self._path, "rb") as file:
            data = file.read()
        pos = 0
        while len(data) - pos >= _HEADER.size:
            length, crc = _HEADER.unpack_from(data, pos)
            body = data[pos + _HEADER.size : pos + _HEADER.size + length]
            if len(body) != length or zlib.crc32(body) != crc:
                break
            yield json.loads(body)
            pos += _HEADER.size + length
        if pos != len(data):
            _log.warning("journal %s: cutting a torn tail of %d bytes", self._path, len(data) - pos)
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self._size = pos

    def add(self, record: dict[str, Any]) -> None:
        """Queues a record; it is durable after the next :meth:`sync`."""
        body = json.dumps(record, separators=(",", ":")).encode()
        self._pending.append(_HEADER.pack(len(body), zlib.crc32(body)) + body)

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
        self._pending.clear()
        try:
            write_all(self._fd, data, self._size)
            os.fdatasync(self._fd)
        except OSError:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)

    def discard(self) -> None:
        """Drops the queued records (their group failed before the journal was written)."""
        self._pending.clear()

    def close(self) -> None:
        """Closes the file; closing twice is harmless."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
