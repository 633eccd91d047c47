"""A read task: what one worker of an engine reads, the same value for every engine."""

from __future__ import annotations

from dataclasses import dataclass

from connector.reader.source.ranges import SegmentRange

__all__ = ["ReadTask"]


@dataclass(frozen=True)
class ReadTask:
    """Byte ranges one worker reads in order: a lineage chain, or a piece of one.

    Attributes:
        lane: the lineage's lane (:func:`~connector.reader.lineage.lineage_lane`),
            the same for every task of a lineage in every batch; a host that
            gives lane ``n`` to worker ``n % workers`` keeps one lineage on one
            worker, so a key's events are never overtaken by its later ones.
        ranges: whole events, in read order (successors after predecessors).
        watermark_in_force: the watermark in force while the task is read
            (the one before its batch), or None: an event at or below it is
            late (:func:`~connector.reader.source.timekeeping.is_late`).
    """

    lane: int
    ranges: tuple[SegmentRange, ...]
    watermark_in_force: int | None = None
