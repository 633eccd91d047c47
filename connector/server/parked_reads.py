"""Reads parked at a segment's tail on the server's event loop, capped per connection.

A parked read holds no thread: it waits on an :class:`asyncio.Event` that the
store sets (through :meth:`Storage.watch_tail`) once there is something
to answer. Each connection may park at most ``per_connection`` reads at once;
one more is refused with :class:`ResourceExhaustedError`, so one client
cannot pile up unbounded waits. Closing releases every parked read at once,
so a stopping server answers them instead of holding its grace period.

Used only from the event loop's thread, so it needs no lock.
"""

from __future__ import annotations

import asyncio
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
        self._closed = False

    @contextmanager
    def parked(self, connection: str) -> Iterator[asyncio.Event]:
        """A wake-up event for one more read of ``connection``, for the ``with`` block.

        The event is already set once :meth:`close` was called.

        Raises:
            ResourceExhaustedError: ``connection`` already has ``per_connection``
                reads parked.
        """
        parked = self._by_connection.setdefault(connection, set())
        if len(parked) >= self.per_connection:
            msg = (
                f"connection {quoted(connection)} already has {len(parked)} reads waiting at "
                f"segment tails, the most one connection may park; read again once one "
                f"returns, or read without waiting"
            )
            raise ResourceExhaustedError(msg, cause="parked_reads_limit")
        woken = asyncio.Event()
        if self._closed:
            woken.set()
        parked.add(woken)
        try:
            yield woken
        finally:
            parked.discard(woken)
            if not parked:
                del self._by_connection[connection]

    def count(self) -> int:
        """How many reads are parked now, over every connection."""
        return sum(len(parked) for parked in self._by_connection.values())

    def close(self) -> None:
        """Wakes every parked read, and every later one at once."""
        self._closed = True
        for parked in self._by_connection.values():
            for woken in parked:
                woken.set()
