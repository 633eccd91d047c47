"""How often a reader syncs with its group: every interval while anything moves, less often idle.

A sync (``GetState``, and a compare-and-set when something changed) is what
carries a reader's positions to its group and the group's changes to the
reader, and its timing bounds how long the fetch session's call may wait.
Every ``sync_interval_ms`` forever made each idle reader cost the store about
ten ``GetState`` and ten ``ReadSegments`` calls a second, whatever happened.

So after an idle sync (one that wrote nothing, found the group's record as
the reader last saw it, reported no position, finished no segment and found
the percentile watermark where it was) the next comes twice as late, up to
``max_idle_sync_interval_ms`` (1 s by default): an idle reader makes about
one call of each kind a second. Anything that moves brings the interval back
at once: a held segment's position (an event taken, a watermark rise, an
idle tick), a segment read to its end (a sync at once, as before), a record
another reader changed (a reader joining or leaving, a checkpoint asked for,
segments given back), a new percentile watermark, and a reader below its
share while segments are free or another reader holds more than its share
(segments will come to it: it looks every interval, and takes them at once).

What that costs, each bounded by the idle bound: a reader joining an idle
group gets its share once the holders' next syncs give segments back (up to
one bound later, then one interval); a checkpoint waits up to one bound for
each idle reader to acknowledge it; a reader learns another's positions, and
so its group watermark rises, up to one bound after that reader reported them
(the reporter syncs at the interval: its position moved); a reader whose
lease ran out is noticed up to one bound late. Leases stay safe: the bound
is never more than a quarter of ``lease_ms``, a backed-off sync comes at
most half its gap late (to end with its caller's wait rather than cut it in
two calls: :meth:`SyncPace.may_come_late`), and a lease is renewed once half
of it has run, so an idle reader renews it at least an eighth of a lease
before it runs out.
"""

from __future__ import annotations

from connector.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_MAX_IDLE_SYNC_INTERVAL_MS",
    "SyncPace",
    "idle_sync_bound_ms",
    "waits_for_segments",
]

#: The longest an idle reader goes between syncs, by default.
DEFAULT_MAX_IDLE_SYNC_INTERVAL_MS = 1_000
#: The most ``max_idle_sync_interval_ms`` may be (an hour).
MOST_IDLE_SYNC_INTERVAL_MS = 3_600_000


def idle_sync_bound_ms(max_idle_sync_interval_ms: int, sync_interval_ms: int, lease_ms: int) -> int:
    """The longest gap between an idle reader's syncs, in ms.

    ``max_idle_sync_interval_ms``, but no more than a quarter of ``lease_ms``
    (the lease is renewed well before it runs out) and no less than
    ``sync_interval_ms`` (below it: no backing off).

    Raises:
        InvalidArgumentError: ``max_idle_sync_interval_ms`` is not an integer
            from 0 to an hour.
    """
    value = max_idle_sync_interval_ms
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"max_idle_sync_interval_ms must be an integer (ms), got {value!r}"
        raise InvalidArgumentError(msg)
    if not 0 <= value <= MOST_IDLE_SYNC_INTERVAL_MS:
        msg = (
            f"max_idle_sync_interval_ms must be from 0 to {MOST_IDLE_SYNC_INTERVAL_MS} "
            f"(an hour), got {value!r}"
        )
        raise InvalidArgumentError(msg)
    return max(sync_interval_ms, min(value, lease_ms // 4))


def waits_for_segments(readable: int, assigned: int, readers: int, held: int, most: int) -> bool:
    """Whether a reader holding ``held`` segments will get more, from the group's counts.

    By the rebalancing rule (:func:`~connector.reader.membership.rebalance`),
    a reader below its share (``readable`` segments over ``readers``,
    rounded up) takes segments nobody holds (some of ``readable`` are not
    ``assigned``), and a reader above it (the one holding ``most``) gives
    some back at its next sync. A reader that will get more syncs every
    interval, so it takes them as soon as they are free; one that will not
    (its share is held, or every other reader is at its share) may back
    off. Counts only: nothing per segment is looked at.
    """
    share = -(-readable // max(readers, 1))
    return held < share and (assigned < readable or most > share)


class SyncPace:
    """The gap between one reader's syncs: the interval, doubling after each idle sync.

    A plain value with no clock: the reader tells it how each sync went
    and asks it for the gap. ``interval_ms`` 0 means a sync on every pass,
    idle or not (0 doubled is 0).
    """

    def __init__(self, interval_ms: int, idle_bound_ms: int):
        self.interval_s = interval_ms / 1000
        self.idle_bound_s = max(interval_ms, idle_bound_ms) / 1000
        self._gap_s = self.interval_s

    def synced(self, *, idle: bool) -> None:
        """A sync succeeded: after an idle one the gap doubles (up to the bound), else resets."""
        if idle:
            self._gap_s = min(self.idle_bound_s, 2 * self._gap_s)
        else:
            self._gap_s = self.interval_s

    def gap_s(self, *, moved: bool) -> float:
        """How long after the last sync the next one comes; the interval when ``moved``."""
        return self.interval_s if moved else self._gap_s

    def may_come_late(self, late_s: float, *, moved: bool) -> bool:
        """Whether the next sync, backed off, may come ``late_s`` after it is due.

        So that a reader's wait ends at its caller's timeout rather than
        being cut in two calls by a sync. At most half the gap late: the
        longest gap is then 1.5 times the bound, under half a lease.
        """
        return not moved and self._gap_s > self.interval_s and late_s <= self._gap_s / 2

    def __repr__(self) -> str:
        return (
            f"SyncPace(gap={self._gap_s:g}s, interval={self.interval_s:g}s, "
            f"idle_bound={self.idle_bound_s:g}s)"
        )
