"""How many of the events a reader returned were late: the late fraction to check against p.

A watermark at percentile ``p`` (:mod:`connector.groups.percentile`)
waits for a fraction ``p`` of the group's work, so about ``1 - p`` of the
events may come out late (flagged, never dropped). :class:`LateCount` is
what a reader observed, so a user can check it against ``p``.
"""

from __future__ import annotations

__all__ = ["LateCount"]


class LateCount:
    """Events returned and how many of them were late; not thread-safe."""

    def __init__(self) -> None:
        self.events = 0
        self.late = 0

    def count(self, events: int, late: int) -> None:
        """Adds ``events`` events returned, ``late`` of them late."""
        self.events += events
        self.late += late

    @property
    def fraction(self) -> float:
        """The late fraction: late events over events returned (0.0 before any)."""
        return self.late / self.events if self.events else 0.0

    @property
    def parts_per_million(self) -> int:
        """:attr:`fraction` in millionths, for metrics that hold integers."""
        return round(self.fraction * 1_000_000)

    def __repr__(self) -> str:
        return f"LateCount(events={self.events}, late={self.late})"
