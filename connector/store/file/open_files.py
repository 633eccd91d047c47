"""A bounded cache of open data files, shared by all of a store's segments.

A store may hold far more segments than a process may hold descriptors, so no
segment keeps its files open: each use borrows a descriptor from here and
gives it back. At most ``limit`` idle descriptors stay open, the least recently
used closed first; a descriptor in use is never closed under its user. When the
system refuses a descriptor (EMFILE, ENFILE) every idle one is closed and the
open tried once more before the error reaches the caller.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["OpenFiles"]

_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND


@dataclass
class _Entry:
    fd: int
    users: int = 0


class OpenFiles:
    """Descriptors of data files, opened on demand, at most ``limit`` kept idle; thread-safe."""

    def __init__(self, limit: int):
        if limit < 1:
            msg = f"the open-file limit must be >= 1, got {limit!r}"
            raise ValueError(msg)
        self.limit = limit
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[tuple[str, bool], _Entry] = collections.OrderedDict()

    @contextlib.contextmanager
    def borrow(self, path: str, writable: bool = False) -> Iterator[int]:
        """A descriptor of ``path`` for the ``with`` block: read-only, or append-only and created.

        Raises:
            OSError: the file could not be opened (a missing file read-only, or
                no descriptor left even after closing every idle one).
        """
        key = (path, writable)
        entry = self._acquire(key)
        try:
            yield entry.fd
        finally:
            self._release(entry)

    def open_count(self) -> int:
        """How many descriptors are open now (idle and in use)."""
        with self._lock:
            return len(self._entries)

    def forget(self, path: str, writable: bool | None = None) -> None:
        """Closes ``path``'s idle descriptors (both kinds unless ``writable`` says which)."""
        kinds = (False, True) if writable is None else (writable,)
        with self._lock:
            for kind in kinds:
                entry = self._entries.get((path, kind))
                if entry is not None and entry.users == 0:
                    del self._entries[(path, kind)]
                    os.close(entry.fd)

    def close(self) -> None:
        """Closes every idle descriptor (call once no file is borrowed any more)."""
        with self._lock:
            self._trim(0)

    def _acquire(self, key: tuple[str, bool]) -> _Entry:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._trim(self.limit - 1)
                entry = _Entry(self._open(*key))
                self._entries[key] = entry
            self._entries.move_to_end(key)
            entry.users += 1
            return entry

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            if len(self._entries) > self.limit:
                self._trim(self.limit)

    def _open(self, path: str, writable: bool) -> int:
        flags = _WRITE_FLAGS if writable else os.O_RDONLY
        try:
            return os.open(path, flags, 0o644)
        except OSError as error:
            if error.errno not in _OUT_OF_DESCRIPTORS:
                raise
        self._trim(0)
        return os.open(path, flags, 0o644)

    def _trim(self, keep: int) -> None:
        """Closes idle descriptors, least recently used first, until at most ``keep`` are open."""
        excess = len(self._entries) - keep
        for key in list(self._entries):
            if excess <= 0:
                break
            entry = self._entries[key]
            if entry.users == 0:
                del self._entries[key]
                os.close(entry.fd)
                excess -= 1

    def __repr__(self) -> str:
        return f"OpenFiles(limit={self.limit}, open={len(self._entries)})"
