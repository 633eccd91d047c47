"""The watermark index of one segment (PDP 26, "Watermark Index").

An entry ``(offset, watermark)`` promises that the data after byte ``offset``
has ingestion times after ``watermark``. The entry at offset -1 holds the
initial watermark, ``CREATION_TIME - 1``. Entries are added in offset order; a
later entry at the same offset (an idle tick, a seal) replaces the earlier one,
and watermarks never step back.

Beside each entry the index keeps the number of events before its boundary
(``offset + 1``), so "the boundary after N events or B bytes" is a binary
search, not a walk over frames. Counts are unknown (None) for an index
restored from a journal that did not record them; a planner then walks.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from connector.errors import FailedPreconditionError
from connector.model import initial_watermark

__all__ = ["WatermarkIndex"]


class WatermarkIndex:
    """Offsets of known watermarks; every key + 1 is an event boundary."""

    def __init__(self, creation_time: int):
        self._offsets: list[int] = [-1]
        self._watermarks: list[int] = [initial_watermark(creation_time)]
        self._counts: list[int] | None = [0]

    def record(self, last_offset: int, watermark: int, events: int | None = 0) -> None:
        """Records that data after ``last_offset`` is ingested after ``watermark``.

        ``events`` is how many events the data up to ``last_offset`` added
        since the previous entry (0 for a tick or a seal); None when not
        known, which makes every later count unknown.

        Raises:
            FailedPreconditionError: when the offset or the watermark would step back.
        """
        if last_offset < self._offsets[-1] or watermark < self._watermarks[-1]:
            msg = (
                f"watermark index entry ({last_offset}, {watermark}) steps back from "
                f"({self._offsets[-1]}, {self._watermarks[-1]})"
            )
            raise FailedPreconditionError(msg)
        if events is None:
            self._counts = None
        if last_offset == self._offsets[-1]:
            self._watermarks[-1] = watermark
            if self._counts is not None:
                self._counts[-1] += events or 0
        else:
            self._offsets.append(last_offset)
            self._watermarks.append(watermark)
            if self._counts is not None:
                self._counts.append(self._counts[-1] + (events or 0))

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

    def entry_index(self, boundary: int) -> int | None:
        """The position of the entry whose boundary (``offset + 1``) is ``boundary``, or None."""
        i = bisect_right(self._offsets, boundary - 1) - 1
        return i if self._offsets[i] == boundary - 1 else None

    def boundary_at_or_after(self, offset: int) -> int | None:
        """The least known event boundary at or after ``offset``, or None (past the tail)."""
        i = bisect_left(self._offsets, offset - 1)
        return self._offsets[i] + 1 if i < len(self._offsets) else None

    def furthest_within(self, boundary: int, max_events: int | None, limit: int) -> tuple[int, int]:
        """The furthest known boundary within ``max_events`` events and byte ``limit``.

        Returns that boundary, at most ``max_events`` events after ``boundary``
        and at or before byte ``limit``, and the events between them
        (``boundary`` itself and 0 if none is). ``boundary`` must be an
        entry's boundary and the counts known. A binary search.
        """
        counts = self._counts
        first = self.entry_index(boundary)
        if counts is None or first is None:
            msg = f"no event count at boundary {boundary} of this watermark index"
            raise FailedPreconditionError(msg)
        last = bisect_right(self._offsets, limit - 1) - 1
        if max_events is not None:
            last = min(last, bisect_right(counts, counts[first] + max_events) - 1)
        last = max(last, first)
        return self._offsets[last] + 1, counts[last] - counts[first]

    def unread_after(self, boundary: int, buckets: int) -> list[tuple[int, int]]:
        """The events after entry boundary ``boundary``, in at most ``buckets`` runs.

        Each run is ``(watermark, events)``: ``events`` consecutive events,
        the first of which comes right after ``watermark`` held (the
        segment's watermark before it, the least of the run's). Runs hold
        about as many events each, and runs with one watermark are one.
        The counts must be known and ``boundary`` an entry's. O(``buckets``
        log entries).
        """
        counts = self._counts
        first = self.entry_index(boundary)
        if counts is None or first is None:
            msg = f"no event count at boundary {boundary} of this watermark index"
            raise FailedPreconditionError(msg)
        start, total = counts[first], counts[-1] - counts[first]
        runs: list[tuple[int, int]] = []
        for k in range(buckets):
            low = start + total * k // buckets
            high = start + total * (k + 1) // buckets
            if high <= low:
                continue
            before = self._watermarks[bisect_right(counts, low) - 1]
            if runs and runs[-1][0] == before:
                runs[-1] = (before, runs[-1][1] + high - low)
            else:
                runs.append((before, high - low))
        return runs

    def time_bounds(self, time_ms: int) -> tuple[int, int | None]:
        """Where events ingested at or after ``time_ms`` may begin: ``(before, after)`` boundaries.

        Every event before boundary ``before`` was ingested before
        ``time_ms``; every event from boundary ``after`` on at or after it
        (None: no entry says so yet, the tail may hold earlier ones). The
        first event at or after ``time_ms`` lies between them: at most one
        entry's worth of events to walk. A binary search.

        Why: an entry ``(o, w)`` promises that the events after ``o`` were
        ingested after ``w``, and is recorded by an operation at time
        ``w + 1`` (an append, a tick, a seal), so the events up to ``o``
        were ingested at ``w + 1`` or before.
        """
        first_not_before = bisect_left(self._watermarks, time_ms - 1)
        before = self._offsets[first_not_before - 1] + 1 if first_not_before else 0
        if first_not_before == len(self._offsets):
            return before, None
        return before, self._offsets[first_not_before] + 1

    @property
    def counts_known(self) -> bool:
        """Whether the index knows its event counts (see the module docstring)."""
        return self._counts is not None

    def entries(self) -> tuple[list[int], list[int]]:
        """The entries' offsets and watermarks (copies), for a snapshot."""
        return list(self._offsets), list(self._watermarks)

    def counts(self) -> list[int] | None:
        """The entries' event counts (a copy), for a snapshot; None when unknown."""
        return None if self._counts is None else list(self._counts)

    @classmethod
    def restored(
        cls, offsets: list[int], watermarks: list[int], counts: Sequence[int] | None = None
    ) -> WatermarkIndex:
        """An index holding the entries :meth:`entries` and :meth:`counts` gave."""
        if (
            not offsets
            or len(offsets) != len(watermarks)
            or offsets[0] != -1
            or (counts is not None and len(counts) != len(offsets))
        ):
            msg = f"a watermark index snapshot of {len(offsets)} offsets is malformed"
            raise FailedPreconditionError(msg)
        index = cls(watermarks[0] + 1)
        index._offsets, index._watermarks = list(offsets), list(watermarks)
        index._counts = None if counts is None else list(counts)
        return index

    def __len__(self) -> int:
        return len(self._offsets)

    def __repr__(self) -> str:
        return f"WatermarkIndex(entries={len(self)}, latest={self.latest})"
