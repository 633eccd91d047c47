"""Calls parked on the server's event loop until there is something to answer, per connection.

A parked call holds no thread: it waits on an :class:`asyncio.Event` that the
store sets (through :meth:`Storage.watch_tail`, or a listener of many
segments) once there is something to answer: a read at a segment's tail, a
fetch session's call over many segments, a wait for streams' tails to change.
Each connection may park at most ``per_connection`` calls at once (a fetch
session's call counts once, whatever the segments it waits on); one more is
refused with :class:`ResourceExhaustedError`, so one client cannot pile up
unbounded waits. Closing releases every parked call at once, so a stopping
server answers them instead of holding its grace period.

Used only from the event loop's thread, so it needs no lock.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from connector.errors import InvalidArgumentError, ResourceExhaustedError, quoted

__all__ = ["DEFAULT_PARKED_READS_PER_CONNECTION", "ParkedReads"]

#: The default cap on one connection's reads waiting at segment tails.
DEFAULT_PARKED_READS_PER_CONNECTION = 1_024


class ParkedReads:
    """The reads waiting at segment tails, by connection (gRPC's peer string)."""

    def __init__(self, per_connection: int = DEFAULT_PARKED_READS_PER_CONNECTION):
        if not isinstance(per_connection, int) or per_connection < 1:
            msg = f"max_parked_reads_per_connection must be an integer >= 1, got {per_connection!r}"
            raise InvalidArgumentError(msg)
        self.per_connection = per_connection
        self._by_connection: dict[str, set[asyncio.Event]] = {}
        self._by_method: Counter[str] = Counter()
        self._closed = False

    @contextmanager
    def parked(self, connection: str, method: str = "ReadSegment") -> Iterator[asyncio.Event]:
        """A wake-up event for one more parked call of ``connection``, for the ``with`` block.

        The event is already set once :meth:`close` was called.

        Raises:
            ResourceExhaustedError: ``connection`` already has ``per_connection``
                reads parked.
        """
        parked = self._by_connection.setdefault(connection, set())
        if len(parked) >= self.per_connection:
            msg = (
                f"connection {quoted(connection)} already has {len(parked)} reads waiting at "
                f"segment tails (a call over many segments counts once), the most one "
                f"connection may park (tidemark-server --max-parked-reads-per-connection); "
                f"read again once one returns, or read without waiting"
            )
            raise ResourceExhaustedError(msg, cause="parked_reads_limit")
        woken = asyncio.Event()
        if self._closed:
            woken.set()
        parked.add(woken)
        self._by_method[method] += 1
        try:
            yield woken
        finally:
            self._by_method[method] -= 1
            parked.discard(woken)
            if not parked:
                del self._by_connection[connection]

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the server is stopping)."""
        return self._closed

    def count(self) -> int:
        """How many calls are parked now, over every connection."""
        return sum(len(parked) for parked in self._by_connection.values())

    def by_method(self) -> dict[str, int]:
        """How many calls of each method are parked now (methods that parked one once)."""
        return dict(self._by_method)

    def close(self) -> None:
        """Wakes every parked read, and every later one at once."""
        self._closed = True
        for parked in self._by_connection.values():
            for woken in parked:
                woken.set()
