"""Clocks: where the store and the readers get the time from.

Every component takes a :class:`Clock` instead of reading the wall clock, so
tests drive time with a :class:`ManualClock` and stay deterministic.
Times are epoch milliseconds (int), as in Flink and Pravega.
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock", "utc_text"]


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
#: The last millisecond a date can name: 9999-12-31T23:59:59.999Z.
_LATEST_MS = 253_402_300_799_999


def utc_text(ms: int) -> str:
    """Epoch milliseconds as people read them: ``2023-11-14T22:13:20.000Z`` (UTC, ISO 8601).

    A time past the last date (a watermark at the end of time) reads ``end of time``.
    """
    if ms > _LATEST_MS:
        return "end of time"
    # Whole milliseconds, not a float of seconds: exact at any date (9999 too).
    moment = _EPOCH + datetime.timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@runtime_checkable
class Clock(Protocol):
    """A source of the current time in epoch milliseconds."""

    def now_ms(self) -> int:
        """Returns the current time; it may stall or step back (callers cope)."""
        ...


class SystemClock:
    """The wall clock."""

    def now_ms(self) -> int:
        """Returns ``time.time()`` in whole milliseconds."""
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A synthetic clock that moves only when told to; safe across threads."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """Returns the time last set."""
        with self._lock:
            return self._now

    def advance(self, delta_ms: int) -> int:
        """Moves the clock by ``delta_ms`` (negative steps back) and returns the new time."""
        with self._lock:
            self._now += delta_ms
            return self._now

    def set(self, now_ms: int) -> None:
        """Sets the clock to ``now_ms``, forwards or back."""
        with self._lock:
            self._now = now_ms

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self.now_ms()})"
