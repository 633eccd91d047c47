"""Sparse event boundaries inside large appends: checking an offset reads a bounded window.

A read must start at an event boundary. The watermark index knows the boundary
at the end of every append, but one append can hold up to
``MAX_EVENTS_PER_APPEND`` events, tens of MiB; checking an offset inside it by
walking the frames from the append's start would read up to all of them.

So every append longer than :data:`STRIDE` bytes also records *checkpoints*:
the first event boundary at least :data:`STRIDE` bytes after the previous
known boundary (the append's start, then the previous checkpoint). Every
boundary between two consecutive known boundaries then lies less than
:data:`STRIDE` bytes after the first of them, and
:func:`connector.framing.lands_on_boundary` decides any offset by reading at
most :data:`STRIDE` bytes and one frame header. Checkpoints are kept in the
journal with the append, so a restart has them without reading any data.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate

from connector.framing import HEADER

__all__ = ["STRIDE", "SparseBoundaries", "checkpoints"]

#: The most bytes between a known boundary and the next checkpoint's search start.
STRIDE = 256 * 1024

#: A frame's size beyond its payload and routing key: the header and the key's length.
_FRAME_OVERHEAD = HEADER.size + 2


def checkpoints(
    start: int,
    payloads: Sequence[bytes],
    routing_keys: Sequence[str] | None = None,
    stride: int = STRIDE,
) -> list[int]:
    """The checkpoints of an append of ``payloads`` framed from offset ``start``.

    Each is the end of a frame, the first at least ``stride`` bytes after the
    previous checkpoint (or ``start``); the append's own end is left out (the
    watermark index has it). Costs one pass in C over the sizes and one binary
    search per checkpoint.
    """
    if routing_keys:
        sizes = (len(p) + len(k.encode()) for p, k in zip(payloads, routing_keys, strict=True))
        ends = list(accumulate(sizes))
    else:
        ends = list(accumulate(map(len, payloads)))
    count = len(ends)
    if count < 2 or ends[-1] + count * _FRAME_OVERHEAD < stride:
        return []

    def end_of(i: int) -> int:
        return start + ends[i] + (i + 1) * _FRAME_OVERHEAD

    found: list[int] = []
    last, i = start, 0
    while True:
        i = bisect_left(range(count), last + stride, lo=i, key=end_of)
        if i >= count - 1:
            return found
        last = end_of(i)
        found.append(last)
        i += 1


class SparseBoundaries:
    """A segment's checkpoints, in offset order; guarded by the segment's ``changed``."""

    def __init__(self, offsets: Iterable[int] = ()):
        self._offsets = list(offsets)

    def add(self, offsets: Iterable[int]) -> None:
        """Adds the checkpoints of the next append (all after the ones held)."""
        self._offsets.extend(offsets)

    def at_or_before(self, offset: int) -> int:
        """The greatest checkpoint at or before ``offset``, or 0."""
        i = bisect_right(self._offsets, offset)
        return self._offsets[i - 1] if i else 0

    def entries(self) -> list[int]:
        """The checkpoints (a copy), for a snapshot."""
        return list(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets)

    def __repr__(self) -> str:
        return f"SparseBoundaries(checkpoints={len(self)})"
