"""A segment's work from a position, for percentile watermarks: compact, bounded, conservative.

What :class:`~connector.model.UnreadWork` holds, answered from memory
(the watermark index's event counts, the writers' history) with at most
one append's frame headers walked (a position inside an append):
O(``buckets`` log entries + writers) per segment, whatever the backlog.
Every bucket's time is the least of its items', so a percentile over the
buckets is never above the one over the items. Both storages answer
through the store's front (:meth:`StoreFront.plan_read`).
"""

from __future__ import annotations

from connector.errors import InvalidArgumentError
from connector.model import TimeCount, UnreadWork
from connector.store.published import PublishedSegment
from connector.store.read_plan import plan_read

__all__ = ["MAX_WORK_BUCKETS", "by_rank", "check_buckets", "unread_work"]

#: The most buckets a plan may ask for of each of a segment's distributions.
MAX_WORK_BUCKETS = 256


def check_buckets(buckets: int) -> None:
    """Refuses a bucket count outside 0 to :data:`MAX_WORK_BUCKETS`, naming it."""
    if not 0 <= buckets <= MAX_WORK_BUCKETS:
        msg = f"work_buckets must be 0 to {MAX_WORK_BUCKETS}, got {buckets!r}"
        raise InvalidArgumentError(msg)


def unread_work(segment: PublishedSegment, offset: int, buckets: int) -> UnreadWork:
    """``segment``'s work from the boundary ``offset`` (checked by the caller), in ``buckets``."""
    snapshot = segment.snapshot()
    return UnreadWork(
        unread=_unread(segment, offset, snapshot.committed_end, buckets),
        writers=by_rank(segment.writers_at(offset), buckets),
        tail_watermark=snapshot.watermark,
    )


def _unread(
    segment: PublishedSegment, offset: int, end: int, buckets: int
) -> tuple[TimeCount, ...]:
    if offset >= end:
        return ()
    before = segment.watermark_after(offset)
    boundary = segment.counted_boundary_at_or_after(offset)
    if boundary is None:  # no counts kept: every event at the watermark here
        events = plan_read(segment, offset, None, None).events
        return (TimeCount(before, events),) if events else ()
    runs = segment.unread_runs(boundary, buckets)
    if boundary > offset:  # inside an append: its rest comes first, at the watermark here
        inside = plan_read(segment, offset, None, boundary - offset).events
        if runs and (len(runs) >= buckets or runs[0][0] == before):
            runs[0] = (min(before, runs[0][0]), runs[0][1] + inside)
        else:
            runs.insert(0, (before, inside))
    return tuple(TimeCount(time, count) for time, count in runs if count)


def by_rank(times: list[int], buckets: int) -> tuple[TimeCount, ...]:
    """``times`` in at most ``buckets`` buckets of about equal count, each at its least time."""
    ordered = sorted(times)
    total = len(ordered)
    counted: list[TimeCount] = []
    for k in range(buckets if total else 0):
        low, high = total * k // buckets, total * (k + 1) // buckets
        if high <= low:
            continue
        if counted and counted[-1].time == ordered[low]:
            counted[-1] = TimeCount(ordered[low], counted[-1].count + high - low)
        else:
            counted.append(TimeCount(ordered[low], high - low))
    return tuple(counted)
