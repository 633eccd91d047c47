"""Planning a read on the store's side: the boundary after N events or B bytes.

A reader that plans a micro-batch under a budget needs "where do whole
events stop, at most ``max_events`` of them and ``max_bytes`` bytes from
``offset``", not the events themselves. :func:`plan_read` answers from the
segment's watermark index, whose entries carry event counts
(:mod:`connector.store.watermark_index`): whole appends are a binary search;
only the partial appends at either end, where no entry falls, have their
frame headers walked (at most one append each, read in windows of
:data:`~connector.store.boundaries.STRIDE` bytes). An index restored without
counts is walked from ``offset``.

A plan may also stop before the first event ingested at or after a time
(``before_time``): the index says between which two of its entries that
event lies, and only the frames between them are walked. A plan from a
segment's first readable offset with ``before_time`` finds where a read by
time starts (Kafka's offsets by timestamp), exactly.

A plan of at least one event also says when the first was ingested (one
header read): the ingestion time of a reader's oldest unread event, which
makes its processing-time watermark (:mod:`connector.groups.progress`).
"""

from __future__ import annotations

from collections.abc import Callable

from connector.framing import HEADER
from connector.model import PlannedRead
from connector.store.boundaries import STRIDE
from connector.store.published import PublishedSegment

__all__ = ["plan_read"]

_Read = Callable[[int, int], bytes]


def plan_read(
    segment: PublishedSegment,
    offset: int,
    max_events: int | None,
    max_bytes: int | None,
    before_time: int | None = None,
) -> PlannedRead:
    """Where a read of ``segment`` from the boundary ``offset`` would stop under the budget.

    Whole events only, at most ``max_events`` of them (None: no limit) in at
    most ``max_bytes`` bytes (None: no limit), up to the committed end, and
    none ingested at or after ``before_time`` (None: no limit); at least one
    event if any is there and it is before ``before_time``, so an event
    larger than ``max_bytes`` is planned alone. The caller has checked
    ``offset`` (a boundary within the segment) and the limits (> 0).
    """
    snapshot = segment.snapshot()
    end = snapshot.committed_end
    limit = end if max_bytes is None else min(end, offset + max_bytes)
    jump_limit = limit  # how far the index may be trusted to jump
    if before_time is not None:
        before, after = segment.time_bounds(before_time)
        if after is not None:
            limit = min(limit, max(after, offset))
        jump_limit = min(limit, max(before, offset))
    walk = _Walk(segment.read_bytes, offset, before_time)
    if offset < end:
        boundary = segment.counted_boundary_at_or_after(offset)
        if boundary is None or boundary > end:  # no counts: walk the whole way
            walk.run(limit, max_events)
        else:
            walk.run(min(boundary, limit), max_events)
            if walk.position == boundary and walk.position < jump_limit:
                left = None if max_events is None else max_events - walk.events
                stop, events, following = segment.furthest_counted(boundary, left, jump_limit)
                if stop > walk.position:
                    walk.jump(stop, events)
                # The partial append after it: walked to its end at most.
                walk.run(
                    limit if following is None else min(limit, following),
                    None if max_events is None else max_events - walk.events,
                )
            elif walk.position == boundary and walk.position < limit:
                # The index may not jump past an event at or after before_time: walk.
                walk.run(limit, None if max_events is None else max_events - walk.events)
        if walk.events == 0 and not walk.reached_time:  # larger than the budget: alone
            walk.run_one()
    # A damaged header may step past the end: plan to the end, where reading meets the damage.
    stop = min(walk.position, end)
    watermark, event_time = segment.watermarks_after(stop)
    if walk.last_time is not None:
        watermark = max(watermark, walk.last_time - 1)
    end_of_segment = snapshot.sealed and stop == end
    first_time = None
    if walk.events:  # the event at offset: its header alone
        first_time = HEADER.unpack(segment.read_bytes(offset, offset + HEADER.size))[2]
    return PlannedRead(
        segment=segment.name,
        offset=offset,
        next_offset=stop,
        events=walk.events,
        watermark=watermark,
        end_of_segment=end_of_segment,
        at_tail=stop == end,
        successors=segment.successors if end_of_segment else (),
        event_time_watermark=event_time,
        first_ingestion_time=first_time,
    )


class _Walk:
    """A walk over frame headers from a boundary, counting events."""

    def __init__(self, read: _Read, start: int, before_time: int | None = None):
        self._read = read
        self.position = start
        self.events = 0
        #: The ingestion time of the event just before ``position``, if walked to it.
        self.last_time: int | None = None
        self._before_time = before_time
        #: Whether the walk stopped at an event ingested at or after ``before_time``.
        self.reached_time = False

    def _too_late(self, time_ms: int) -> bool:
        if self._before_time is not None and time_ms >= self._before_time:
            self.reached_time = True
        return self.reached_time

    def jump(self, boundary: int, events: int) -> None:
        """Moves to a known boundary ``events`` events on (found in the index)."""
        self.position = boundary
        self.events += events
        self.last_time = None

    def run(self, limit: int, max_events: int | None) -> None:
        """Walks whole frames ending at or before ``limit``, at most ``max_events`` of them.

        Stops at a frame ingested at or after the walk's ``before_time``.
        """
        unpack = HEADER.unpack_from
        size = HEADER.size
        while (
            self.position < limit
            and (max_events is None or max_events > 0)
            and not self.reached_time
        ):
            window_end = min(limit, self.position + STRIDE)
            window = self._read(self.position, window_end)
            pos, count, last = 0, 0, None
            while len(window) - pos >= size and (max_events is None or count < max_events):
                length, _, time_ms = unpack(window, pos)
                if pos + size + length > len(window) or self._too_late(time_ms):
                    break
                pos += size + length
                count += 1
                last = time_ms
            if count:
                self.position += pos
                self.events += count
                self.last_time = last
                if max_events is not None:
                    max_events -= count
            if (max_events is not None and max_events <= 0) or self.reached_time:
                return
            if len(window) - pos < size:
                if window_end == limit:
                    return
                continue  # a header cut by the window: the next window starts at it
            # The next frame crosses the window: step over it by its header alone.
            length, _, time_ms = unpack(window, pos)
            if self.position + size + length > limit or self._too_late(time_ms):
                return
            self.position += size + length
            self.events += 1
            self.last_time = time_ms
            if max_events is not None:
                max_events -= 1

    def run_one(self) -> None:
        """Steps over the one frame at ``position``, whatever its size (unless it is too late)."""
        length, _, time_ms = HEADER.unpack(self._read(self.position, self.position + HEADER.size))
        if self._too_late(time_ms):
            return
        self.position += HEADER.size + length
        self.events += 1
        self.last_time = time_ms
