"""Reading a segment, the same for every storage: whole events, the watermark after them, waits.

:class:`TailReaders` serves :meth:`Storage.read`, :meth:`Storage.watch_tail`
and :meth:`Storage.follow` from a
:class:`~connector.store.published.PublishedSegment` (the front checked the
request's arguments, and the engine found the segment and made sure its view
reaches the offset asked for), and counts the reads waiting at tails;
:func:`plan` serves :meth:`Storage.plan_read`. An engine's own part is where
the bytes come from (:meth:`PublishedSegment.read_bytes`).

Every frame a read serves is checked against its checksum first, whatever
the storage (a flipped bit on a disk, a replica's damaged copy): a read
serves the intact events before a damaged one, and a read at the damaged
one fails with :class:`~connector.errors.DataLossError` naming the segment,
the offset and where the append holding it ends. Nothing damaged is served.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable

from connector.errors import DataLossError, NotFoundError, StoreUnavailableError
from connector.framing import intact_prefix
from connector.model import PlannedRead, ReadResult
from connector.store.changes import Listener
from connector.store.published import PublishedSegment
from connector.store.read_plan import plan_read

__all__ = ["FollowedSegment", "TailReaders", "checked_bytes", "damaged", "plan"]


def damaged(target: PublishedSegment, offset: int, reason: str) -> DataLossError:
    """The error of a read that meets the damaged event at ``offset`` of ``target``."""
    following = target.boundary_after(offset)
    after = (
        f"; its append ends at offset {following}: read on from there"
        if following is not None
        else ""
    )
    where = f"segment {target.name!r} at offset {offset}"
    msg = f"data loss in {where}: the event there {reason}{after}"
    return DataLossError(msg, target.name, offset, -1 if following is None else following)


def checked_bytes(target: PublishedSegment, offset: int, limit: int, end: int) -> bytes:
    """The intact whole events of ``target`` from ``offset`` up to ``limit``, every frame checked.

    ``offset`` is an event boundary below ``end``, the committed end the read
    works from, and ``limit`` is at or below ``end``. At least one event is
    returned (a first event longer than ``limit - offset`` whole). Events
    after a damaged one are left for the next read, which starts at it.

    Raises:
        DataLossError: the event at ``offset`` is damaged (see :func:`damaged`).
    """
    if target.append_end_within(offset, limit) is None:
        # No append ends in the range: find its last whole event and check them in one pass.
        data = target.read_bytes(offset, limit)
        intact = intact_prefix(data, offset)
        if intact.length > 0:
            if intact.length < len(data):
                data = data[: intact.length]
            target.remember_boundary(offset + intact.length)  # where the next read starts
            return data
        # The first event is longer than the range, or damaged: read it whole, as below.
    # A damaged header may claim a frame past the end: never read beyond it.
    stop = min(target.read_stop(offset, limit), end)
    data = target.read_bytes(offset, stop)
    intact = intact_prefix(data, offset)
    if intact.reason is not None:
        if intact.length == 0:
            raise damaged(target, offset, intact.reason)
        data = data[: intact.length]
        target.remember_boundary(offset + intact.length)  # the next read starts at the damage
    return data


class TailReaders:
    """Reads of one store, and how many of them wait at a segment's tail now; thread-safe.

    ``closing`` is the store's closed flag: once set, waits end at once.
    """

    def __init__(self, closing: threading.Event):
        self._closing = closing
        self._lock = threading.Lock()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """How many reads wait at a tail now, with a thread or without."""
        with self._lock:
            return self._waiting

    @property
    def closing(self) -> bool:
        """Whether the store is closing (waits end at once)."""
        return self._closing.is_set()

    def follow(self, target: PublishedSegment, listener: Listener) -> FollowedSegment:
        """Reads of ``target``, with ``listener`` told of its every change (see ``follow``)."""
        return FollowedSegment(self, target, listener)

    def _add(self, delta: int) -> None:
        with self._lock:
            self._waiting += delta

    def read(
        self,
        target: PublishedSegment,
        offset: int,
        max_bytes: int,
        wait_ms: int,
        known_watermark: int | None,
    ) -> ReadResult:
        """Reads whole events of ``target`` from ``offset``; see :meth:`Storage.read`."""
        snapshot = target.snapshot()
        target.check_within(offset, snapshot.committed_end)
        target.check_readable(offset)
        if offset == snapshot.committed_end and not snapshot.sealed and wait_ms > 0:
            self._add(1)
            try:
                snapshot = target.wait_at_tail(
                    offset, known_watermark, wait_ms / 1000, self._closing
                )
            finally:
                self._add(-1)
        stop = offset
        data = b""
        if offset < snapshot.committed_end:
            end = snapshot.committed_end
            data = checked_bytes(target, offset, min(end, offset + max_bytes), end)
            stop = offset + len(data)
        end_of_segment = snapshot.sealed and stop == snapshot.committed_end
        watermark, event_time, floor = target.watermarks_over(offset, stop)
        return ReadResult(
            segment=target.name,
            offset=offset,
            next_offset=stop,
            data=data,
            checksum=zlib.crc32(data),
            watermark=watermark,
            end_of_segment=end_of_segment,
            successors=target.successors if end_of_segment else (),
            event_time_watermark=event_time,
            event_time_floor=floor,
        )

    def watch(
        self,
        target: PublishedSegment,
        offset: int,
        known_watermark: int | None,
        wake: Callable[[], None],
    ) -> Callable[[], None] | None:
        """Arranges for ``wake()`` once a read at ``offset`` would return (see ``watch_tail``)."""
        if self._closing.is_set():
            return None
        withdraw_watch = target.watch_tail(offset, known_watermark, wake)
        if withdraw_watch is None:
            return None
        self._add(1)
        withdrawn = threading.Event()

        def withdraw() -> None:
            withdraw_watch()
            with self._lock:
                if not withdrawn.is_set():
                    withdrawn.set()
                    self._waiting -= 1

        if self._closing.is_set():  # closed while registering: close() may have missed it
            withdraw()
            return None
        return withdraw


class FollowedSegment:
    """Reads of one segment, whose listener hears of its every change until :meth:`close`.

    Bound to the segment it was opened on: once that segment goes away (its
    stream deleted, even if one of the same name is created again) a read
    raises NotFoundError, never reads another segment's data.
    """

    def __init__(self, readers: TailReaders, target: PublishedSegment, listener: Listener):
        self._readers = readers
        self._target = target
        self.name = target.name
        self._stop = target.listen(listener)

    def read(self, offset: int, max_bytes: int, known_watermark: int | None) -> ReadResult:
        """Reads whole events from ``offset`` without waiting (see :meth:`Storage.read`).

        Raises:
            NotFoundError: the segment went away.
            StoreUnavailableError: the store is closing.
        """
        if self._readers.closing:
            msg = "the store is closing"
            raise StoreUnavailableError(msg)
        if self._target.retired:
            msg = f"segment {self.name!r} no longer exists: its stream was deleted"
            raise NotFoundError(msg)
        return self._readers.read(self._target, offset, max_bytes, 0, known_watermark)

    def close(self) -> None:
        """Stops the listener; closing twice is harmless."""
        self._stop()

    def __repr__(self) -> str:
        return f"FollowedSegment({self.name!r})"


def plan(
    target: PublishedSegment,
    offset: int,
    max_events: int | None,
    max_bytes: int | None,
    before_time: int | None = None,
) -> PlannedRead:
    """Where a read of ``target`` from ``offset`` under a budget would stop (see ``plan_read``)."""
    target.check_within(offset, target.snapshot().committed_end)
    target.check_readable(offset)
    planned = plan_read(target, offset, max_events, max_bytes, before_time)
    target.remember_boundary(planned.next_offset)  # where the planner reads or plans next
    return planned
