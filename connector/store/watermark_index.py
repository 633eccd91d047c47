"""The watermark index of one segment (PDP 26, "Watermark Index").

An entry ``(offset, watermark)`` promises that the data after byte ``offset``
has ingestion times after ``watermark``. The entry at offset -1 holds the
initial watermark, ``CREATION_TIME - 1``. Entries are added in offset order; a
later entry at the same offset (an idle tick, a seal) replaces the earlier one,
and watermarks never step back.
"""

from __future__ import annotations

from bisect import bisect_right

from connector.errors import FailedPreconditionError

__all__ = ["WatermarkIndex"]


class WatermarkIndex:
    """Offsets of known watermarks; every key + 1 is an event boundary."""

    def __init__(self, creation_time: int):
        self._offsets: list[int] = [-1]
        self._watermarks: list[int] = [creation_time - 1]

    def record(self, last_offset: int, watermark: int) -> None:
        """Records that data after ``last_offset`` is ingested after ``watermark``.

        Raises:
            FailedPreconditionError: when the offset or the watermark would step back.
        """
        if last_offset < self._offsets[-1] or watermark < self._watermarks[-1]:
            msg = (
                f"watermark index entry ({last_offset}, {watermark}) steps back from "
                f"({self._offsets[-1]}, {self._watermarks[-1]})"
            )
            raise FailedPreconditionError(msg)
        if last_offset == self._offsets[-1]:
            self._watermarks[-1] = watermark
        else:
            self._offsets.append(last_offset)
            self._watermarks.append(watermark)

    def watermark_after(self, end_offset: int) -> int:
        """The watermark that holds once the data before ``end_offset`` is consumed."""
        return self._watermarks[bisect_right(self._offsets, end_offset - 1) - 1]

    @property
    def latest(self) -> int:
        """The watermark at the tail."""
        return self._watermarks[-1]

    def boundary_at_or_before(self, offset: int) -> int:
        """The greatest known event boundary at or before ``offset``."""
        return self._offsets[bisect_right(self._offsets, offset - 1) - 1] + 1

    def entries(self) -> tuple[list[int], list[int]]:
        """The entries' offsets and watermarks (copies), for a snapshot."""
        return list(self._offsets), list(self._watermarks)

    @classmethod
    def restored(cls, offsets: list[int], watermarks: list[int]) -> WatermarkIndex:
        """An index holding the entries :meth:`entries` gave."""
        if not offsets or len(offsets) != len(watermarks) or offsets[0] != -1:
            msg = f"a watermark index snapshot of {len(offsets)} offsets is malformed"
            raise FailedPreconditionError(msg)
        index = cls(watermarks[0] + 1)
        index._offsets, index._watermarks = list(offsets), list(watermarks)
        return index

    def __len__(self) -> int:
        return len(self._offsets)

    def __repr__(self) -> str:
        return f"WatermarkIndex(entries={len(self)}, latest={self.latest})"
