"""Event-time ordering without an engine: buffer, release on the watermark, report the late.

The engine-free twin of the adapters' ordering operators (the seed's
EventTimeOrderingOperator): events are held until the watermark passes their
event time, then released in event-time order; an event whose time is at or
below the current watermark is late, counted and handed to ``on_late``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from connector.reader.source.timekeeping import is_late, rose

__all__ = ["EventTimeOrderer", "Timestamped"]

T = TypeVar("T")
_log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class Timestamped(Generic[T]):
    """A value with its event time (epoch ms)."""

    event_time: int
    value: T = field(compare=False)


class EventTimeOrderer(Generic[T]):
    """Orders values by event time using watermarks.

    Guarantees: :meth:`advance` releases values in non-decreasing event time,
    each at most once, and only once the watermark is at or above their
    event time; a value that arrives with event time <= the current watermark
    is never released: it is counted in ``late_count`` and passed to
    ``on_late``. Watermarks that do not rise are ignored.
    """

    def __init__(self, on_late: Callable[[Timestamped[T]], None] | None = None):
        self._heap: list[tuple[int, int, Timestamped[T]]] = []
        self._sequence = itertools.count()
        self._on_late = on_late
        self.watermark: int | None = None
        self.late_count = 0

    def add(self, value: T, event_time: int) -> bool:
        """Buffers ``value``; returns False (and reports it) when it is late."""
        item = Timestamped(event_time, value)
        if is_late(event_time, self.watermark):
            self.late_count += 1
            _log.debug("Late record (reported, not dropped): (%d,%r)", event_time, value)
            if self._on_late is not None:
                self._on_late(item)
            return False
        heapq.heappush(self._heap, (event_time, next(self._sequence), item))
        return True

    def advance(self, watermark: int) -> list[Timestamped[T]]:
        """Moves the watermark and returns the values it releases, in event-time order."""
        if not rose(watermark, self.watermark):
            return []
        self.watermark = watermark
        _log.debug("Advancing the event time watermark: Watermark @ %d", watermark)
        released = []
        while self._heap and is_late(self._heap[0][0], watermark):  # at or below it: due
            released.append(heapq.heappop(self._heap)[2])
        return released

    @property
    def buffered(self) -> int:
        """How many values wait for the watermark."""
        return len(self._heap)

    def __repr__(self) -> str:
        return (
            f"EventTimeOrderer(watermark={self.watermark}, buffered={self.buffered}, "
            f"late={self.late_count})"
        )
