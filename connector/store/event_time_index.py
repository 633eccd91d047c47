"""The event-time index of one segment: the writers' watermark by offset (seed 002).

Beside the ingestion watermark index (:mod:`~connector.store.watermark_index`),
an entry ``(offset, time)`` says that from byte ``offset + 1`` on, the
segment's active writers have asserted ``time`` at the least (see
:func:`connector.store.event_time.held_time`); ``None`` says no active writer
holds it. The entry at offset -1 holds the value the segment started with
(None, or what its predecessors held at their seal). Entries are added in
offset order, only when the value changes; a later entry at the same offset
replaces the earlier one. Unlike ingestion watermarks these may fall: a
writer joining with an assertion below the others lowers the minimum (a
reader never lets its own watermark fall; see the reader core).
"""

from __future__ import annotations

from bisect import bisect_right

from connector.errors import FailedPreconditionError

__all__ = ["EventTimeIndex"]


class EventTimeIndex:
    """Offsets where a segment's event-time watermark changed."""

    def __init__(self, initial: int | None = None):
        self._offsets: list[int] = [-1]
        self._times: list[int | None] = [initial]

    def record(self, last_offset: int, time: int | None) -> None:
        """Records that from ``last_offset + 1`` on the watermark is ``time``.

        Raises:
            FailedPreconditionError: ``last_offset`` is before the last entry's.
        """
        if last_offset < self._offsets[-1]:
            msg = (
                f"event-time index entry at offset {last_offset} comes before the last one "
                f"at {self._offsets[-1]}"
            )
            raise FailedPreconditionError(msg)
        if last_offset == self._offsets[-1]:
            self._times[-1] = time
            if len(self._times) > 1 and self._times[-2] == time:
                self._offsets.pop()
                self._times.pop()
        elif time != self._times[-1]:
            self._offsets.append(last_offset)
            self._times.append(time)

    def time_after(self, end_offset: int) -> int | None:
        """The watermark once the data before ``end_offset`` is consumed."""
        return self._times[bisect_right(self._offsets, end_offset - 1) - 1]

    def least_within(self, start_offset: int, end_offset: int) -> int | None:
        """The least watermark in force at an event of ``[start_offset, end_offset)``.

        The one at ``start_offset`` and every one recorded inside (a writer
        joining below the others lowers it there); None only when none of
        them is held. Without data (``end_offset <= start_offset``), the
        one at ``start_offset``.
        """
        first = bisect_right(self._offsets, start_offset - 1) - 1
        # An entry at o holds from o + 1: those before end_offset - 1 reach an event inside.
        last = max(first + 1, bisect_right(self._offsets, end_offset - 2))
        held = [t for t in self._times[first:last] if t is not None]
        return min(held) if held else None

    @property
    def latest(self) -> int | None:
        """The watermark at the tail."""
        return self._times[-1]

    def entries(self) -> tuple[list[int], list[int | None]]:
        """The entries' offsets and times (copies), for a snapshot."""
        return list(self._offsets), list(self._times)

    @classmethod
    def restored(cls, offsets: list[int], times: list[int | None]) -> EventTimeIndex:
        """An index holding the entries :meth:`entries` gave.

        Raises:
            FailedPreconditionError: the entries are malformed.
        """
        if not offsets or len(offsets) != len(times) or offsets[0] != -1:
            msg = f"an event-time index snapshot of {len(offsets)} offsets is malformed"
            raise FailedPreconditionError(msg)
        index = cls(times[0])
        index._offsets, index._times = list(offsets), list(times)
        return index

    def __len__(self) -> int:
        return len(self._offsets)

    def __repr__(self) -> str:
        return f"EventTimeIndex(entries={len(self)}, latest={self.latest})"
