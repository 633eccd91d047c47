"""What readers see of a segment, whatever stores its bytes (PDP 26's read side).

A :class:`PublishedSegment` holds a segment's identity and lineage and its
*published* state: the committed end, the seal, the first readable offset
(truncation), LAST_WRITE_TIME, the watermark index and the sparse event
boundaries, the writers' event numbers, and the event time the writers
asserted (their marks and the event-time index, :mod:`.event_time`).
Records are applied to it once they are durable (:meth:`apply_commit`,
:meth:`apply_tick`, :meth:`apply_marks`, :meth:`seal`, :meth:`truncate`);
readers read from it, wait at its tail (with a thread, or
without one through :meth:`watch_tail`) and check offsets against it. Its
bytes come from :meth:`read_bytes`, which each storage provides: the file
store reads its data file, the JetStream store the messages holding them.

Every applied change (and the segment's creation, once :meth:`join` placed
it in its stream) is noted in its stream's
:class:`~connector.store.changes.StreamChanges` and told to the segment's
listeners (:meth:`listen`), under the segment's lock: the one place change
notification happens, whatever the storage (:mod:`connector.store.changes`).
:meth:`tail` reads the published state with the version of its last change.

The *pending* fields (``pending_end``, ``pending_time``, ``pending_sealed``,
the pending writer marks) are the view of whoever prepares the next change:
never ahead of what is durable in a way a reader could see. The published fields are guarded by
the segment's condition, which readers wait on at the tail.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from connector.errors import InvalidArgumentError, TruncatedError
from connector.framing import lands_on_boundary, scan_end
from connector.model import SegmentInfo, SegmentTail, WriterAssertion
from connector.store.boundaries import STRIDE, SparseBoundaries
from connector.store.changes import Listener, Listeners, StreamChanges
from connector.store.event_time import (
    Marks,
    WriterMark,
    after_append,
    caught_up,
    held_time,
    inherited_marks,
)
from connector.store.event_time_index import EventTimeIndex
from connector.store.watermark_index import WatermarkIndex
from connector.store.writer_history import WriterHistory

__all__ = ["PublishedSegment", "SegmentIdentity", "SegmentSnapshot"]

_log = logging.getLogger(__name__)

#: How many offsets handed out as a read's next offset a segment remembers.
_REMEMBERED_BOUNDARIES = 256


@dataclass(eq=False)
class _TailWatch:
    """A reader waiting without a thread for data past ``offset`` or a watermark above ``known``."""

    offset: int
    known: int
    wake: Callable[[], None]


@dataclass(frozen=True)
class SegmentIdentity:
    """What a segment is from its creation on, whatever stores it."""

    #: The segment's one spelling, ``scope/stream/number``.
    name: str
    number: int
    key_low: float
    key_high: float
    #: The stream's epoch the segment was created in.
    epoch: int
    creation_time: int
    predecessors: tuple[str, ...]


@dataclass(frozen=True)
class SegmentSnapshot:
    """The published state a read works from."""

    committed_end: int
    watermark: int
    sealed: bool
    #: The writers' event-time watermark at the tail (None: no active writer holds it).
    event_time: int | None = None


class PublishedSegment:
    """A segment's identity, lineage and published state; see the module docstring.

    Subclasses provide :meth:`read_bytes`.
    """

    def __init__(self, identity: SegmentIdentity):
        self.name = identity.name
        self.number = identity.number
        self.key_low = identity.key_low
        self.key_high = identity.key_high
        self.epoch = identity.epoch
        self.creation_time = identity.creation_time
        self.predecessors = identity.predecessors
        self.successors: tuple[str, ...] = ()
        self._changed = threading.Condition()
        # Reads waiting at the tail without a thread (see watch_tail); under `_changed`.
        self._watches: set[_TailWatch] = set()
        # Told of every change (see listen), and the stream's record of changes (see join).
        self._listeners = Listeners()
        self._stream_changes: StreamChanges[PublishedSegment] | None = None
        #: The stream's version of this segment's last change (0: not placed in a stream).
        self.version = 0
        #: Set once the segment went away (its stream deleted) or the store closed.
        self.retired = False
        # Published: read and written under `_changed`.
        self.sealed = False
        self.committed_end = 0
        #: The first readable offset: data before it was truncated away.
        self.head = 0
        self.last_write_time = self.creation_time
        self._index = WatermarkIndex(self.creation_time)
        # The writers' marks (seed 002) and the event-time index they give, published.
        self._marks: dict[str, WriterMark] = {}
        self._event_index = EventTimeIndex()
        self._writer_history = WriterHistory()
        self._checkpoints = SparseBoundaries()
        # Mid-batch offsets handed out as a read's next offset: known event boundaries,
        # so a sequential reader's next read is not checked by rescanning its batch.
        self._read_boundaries: collections.OrderedDict[int, None] = collections.OrderedDict()
        # Pending: the view of whoever prepares the next change.
        self.pending_end = 0
        self.pending_time = self.creation_time
        self.pending_sealed = False
        self._writer_numbers: dict[str, int] = {}
        # The marks as the next change sees them: a storage that prepares several changes
        # before they are durable stages them here (stage_mark); applying catches it up.
        self._pending_marks: dict[str, WriterMark] = {}

    # --- preparing changes --------------------------------------------------------

    def next_time(self, now_ms: int) -> int:
        """The time of the next temporal operation: strictly after the last one."""
        self.pending_time = max(now_ms, self.pending_time + 1)
        return self.pending_time

    def stage_time(self, now_ms: int) -> tuple[int, Callable[[], None]]:
        """:meth:`next_time`, and the step that takes it back should its change fail."""
        previous = self.pending_time
        time_ms = self.next_time(now_ms)

        def undo() -> None:
            self.pending_time = previous

        return time_ms, undo

    def expected_event_number(self, writer_id: str) -> int:
        """The number of the next event ``writer_id`` may append here (0 for a new writer)."""
        return self._writer_numbers.get(writer_id, -1) + 1

    def writer_numbers(self) -> dict[str, int]:
        """Each writer's last event number here (a copy)."""
        return dict(self._writer_numbers)

    def pending_marks(self) -> Marks:
        """The writers' marks as the next change sees them (do not change the mapping)."""
        return self._pending_marks

    def stage_mark(self, writer_id: str, mark: WriterMark) -> Callable[[], None]:
        """Sets a writer's pending mark; returns the step that takes it back if the change fails."""
        previous = self._pending_marks.get(writer_id)
        self._pending_marks[writer_id] = mark

        def undo() -> None:
            if previous is None:
                self._pending_marks.pop(writer_id, None)
            else:
                self._pending_marks[writer_id] = previous

        return undo

    def inherit_marks(self, predecessors: Sequence[Marks]) -> None:
        """Starts a new segment with the marks its predecessors held at their seal.

        Call before any change of the segment is applied.
        """
        marks = inherited_marks(predecessors, self.creation_time)
        with self._changed:
            self._marks = marks
            self._event_index = EventTimeIndex(held_time(marks))
            self._writer_history.record(0, {}, marks)
        self._pending_marks = dict(marks)

    # --- applying durable records -------------------------------------------------

    def apply_commit(
        self,
        writer_id: str,
        last_event_number: int,
        end: int,
        time_ms: int,
        checkpoints: Sequence[int],
        events: int | None,
    ) -> None:
        """Publishes an append of ``events`` events: data up to ``end``, ingested at ``time_ms``.

        ``events`` None (a journal that did not count them) leaves the
        watermark index's event counts unknown from here on.
        """
        self._writer_numbers[writer_id] = max(
            last_event_number, self._writer_numbers.get(writer_id, -1)
        )
        self._catch_up(end, time_ms)
        marks = None
        if writer_id in self._marks:  # an asserting writer was seen: its idle timeout restarts
            marks = after_append(self._marks, writer_id, time_ms)
            self._catch_up_marks(marks, (writer_id,))
        self._publish(end, time_ms, checkpoints=checkpoints, events=events, marks=marks)

    def apply_tick(self, time_ms: int) -> None:
        """Publishes an idle tick: the tail's watermark moves to ``time_ms - 1``."""
        self._catch_up(self.committed_end, time_ms)
        self._publish(self.committed_end, time_ms)

    def apply_marks(self, marks: Marks, changed: Sequence[str], time_ms: int) -> None:
        """Publishes a change of event time at ``time_ms``: ``marks`` are the writers' marks now.

        A temporal operation, as an idle tick is: the tail's ingestion
        watermark moves to ``time_ms - 1``, and the event-time watermark from
        the tail on is what ``marks`` hold. ``changed`` names the writers the
        change touched (for the pending view).
        """
        self._catch_up(self.committed_end, time_ms)
        self._catch_up_marks(marks, changed)
        self._publish(self.committed_end, time_ms, marks=marks)

    def marks(self) -> Marks:
        """The writers' published marks (do not change the mapping)."""
        with self._changed:
            return self._marks

    def _catch_up_marks(self, marks: Marks, changed: Sequence[str]) -> None:
        for writer_id in changed:
            self._pending_marks[writer_id] = caught_up(
                self._pending_marks.get(writer_id), marks[writer_id]
            )

    def seal(self, time_ms: int, successors: tuple[str, ...] | None = None) -> None:
        """Publishes the seal at ``time_ms`` (and the successors, after a scale)."""
        if successors is not None:
            self.successors = successors
        self.pending_sealed = True
        self._catch_up(self.committed_end, time_ms)
        self._publish(self.committed_end, time_ms, sealed=True)

    def truncate(self, head: int) -> None:
        """Makes the data before ``head`` unreadable (a boundary at or below the end)."""
        with self._changed:
            self.head = max(self.head, head)
            self._changed.notify_all()
            self._fire_watches(everyone=True)
            self._note_change()

    def merge_writer_numbers(self, numbers: Mapping[str, int]) -> None:
        """Takes each writer's last event number from ``numbers`` where it is higher."""
        for writer_id, last in numbers.items():
            self._writer_numbers[writer_id] = max(last, self._writer_numbers.get(writer_id, -1))

    @property
    def wholly_truncated(self) -> bool:
        """Whether every byte was truncated (its data may be gone)."""
        return 0 < self.committed_end <= self.head

    def _catch_up(self, end: int, time_ms: int) -> None:
        """Brings the pending view up to a record (a no-op live, needed at recovery)."""
        self.pending_end = max(self.pending_end, end)
        self.pending_time = max(self.pending_time, time_ms)

    def _publish(
        self,
        end: int,
        time_ms: int,
        sealed: bool = False,
        checkpoints: Sequence[int] = (),
        events: int | None = 0,
        marks: Marks | None = None,
    ) -> None:
        with self._changed:
            self._checkpoints.add(checkpoints)
            self.committed_end = end
            self.last_write_time = time_ms
            self._index.record(end - 1, time_ms - 1, events)
            if marks is not None:
                self._writer_history.record(end, self._marks, marks)
                self._marks = dict(marks)
                self._event_index.record(end - 1, held_time(marks))
            self.sealed = self.sealed or sealed
            self._changed.notify_all()
            self._fire_watches(everyone=False)
            self._note_change()

    # --- change notification ------------------------------------------------------

    def join(self, changes: StreamChanges[PublishedSegment]) -> None:
        """Makes ``changes`` the record of this segment's changes and notes its creation.

        Called once, when the segment is placed in its stream (before that,
        its changes are told to its listeners only).
        """
        with self._changed:
            self._stream_changes = changes
            self._note_change()

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Tells ``listener`` of every change from now on, and of the segment going away.

        ``listener`` runs on the thread that applies the change, under the
        segment's lock: it must be quick and must not call the store. Returns
        the function that stops it (harmless to call twice).
        """
        return self._listeners.add(listener)

    @property
    def listened(self) -> int:
        """How many listeners the segment has now."""
        return len(self._listeners)

    def _note_change(self) -> None:
        """Notes a change in the stream's record and tells the listeners (under `_changed`)."""
        if self._stream_changes is not None:
            self.version = self._stream_changes.note(self.number, self)
        self._listeners.notify()

    def tail(self) -> SegmentTail:
        """The segment's published end, watermarks, seal and lineage, with their version."""
        with self._changed:
            return SegmentTail(
                segment=self.name,
                version=self.version,
                first_offset=self.head,
                write_offset=self.committed_end,
                watermark=self._index.latest,
                event_time_watermark=self._event_index.latest,
                sealed=self.sealed,
                last_write_time=self.last_write_time,
                creation_time=self.creation_time,
                key_low=self.key_low,
                key_high=self.key_high,
                epoch=self.epoch,
                predecessors=self.predecessors,
                successors=self.successors,
            )

    # --- the readers' side ----------------------------------------------------

    def read_bytes(self, start: int, stop: int) -> bytes:
        """The segment's bytes between two offsets (both within the committed data)."""
        raise NotImplementedError

    def snapshot(self) -> SegmentSnapshot:
        """The published end, tail watermarks and seal, read consistently."""
        with self._changed:
            return self._snapshot()

    def _snapshot(self) -> SegmentSnapshot:
        return SegmentSnapshot(
            self.committed_end, self._index.latest, self.sealed, self._event_index.latest
        )

    def watermark_after(self, end_offset: int) -> int:
        """The watermark that holds once the data before ``end_offset`` is consumed."""
        with self._changed:
            return self._index.watermark_after(end_offset)

    def watermarks_after(self, end_offset: int) -> tuple[int, int | None]:
        """The ingestion and event-time watermarks once the data before ``end_offset`` is consumed.

        Read together, so the two come from the same published state.
        """
        with self._changed:
            return (
                self._index.watermark_after(end_offset),
                self._event_index.time_after(end_offset),
            )

    def watermarks_over(self, start: int, end: int) -> tuple[int, int | None, int | None]:
        """What a read of ``[start, end)`` carries, from one published state.

        The ingestion and event-time watermarks after it (as
        :meth:`watermarks_after`), and the least event-time watermark in
        force at any of its events (:meth:`EventTimeIndex.least_within`).
        """
        with self._changed:
            return (
                self._index.watermark_after(end),
                self._event_index.time_after(end),
                self._event_index.least_within(start, end),
            )

    def unread_runs(self, boundary: int, buckets: int) -> list[tuple[int, int]]:
        """The events after indexed boundary ``boundary``: :meth:`WatermarkIndex.unread_after`."""
        with self._changed:
            return self._index.unread_after(boundary, buckets)

    def writers_at(self, offset: int) -> list[int]:
        """The assertions of the writers active at ``offset``, one each (:class:`WriterHistory`)."""
        with self._changed:
            return self._writer_history.at(offset, self._event_index.time_after(offset))

    def event_index_entries(self) -> tuple[list[int], list[int | None]]:
        """The event-time index's offsets and times (copies)."""
        with self._changed:
            return self._event_index.entries()

    def index_entries(self) -> tuple[list[int], list[int], list[int] | None]:
        """The watermark index's offsets, watermarks and event counts (copies)."""
        with self._changed:
            offsets, watermarks = self._index.entries()
            return offsets, watermarks, self._index.counts()

    def counted_boundary_at_or_after(self, offset: int) -> int | None:
        """The least indexed boundary at or after ``offset`` whose event count is known.

        None when the index knows no counts (a journal that did not keep them)
        or no boundary lies at or after ``offset``.
        """
        with self._changed:
            if not self._index.counts_known:
                return None
            return self._index.boundary_at_or_after(offset)

    def furthest_counted(
        self, boundary: int, max_events: int | None, limit: int
    ) -> tuple[int, int, int | None]:
        """The furthest indexed boundary within ``max_events`` events of ``boundary`` and ``limit``.

        Returns that boundary, the events between, and the next indexed
        boundary after it (None at the tail); see
        :meth:`WatermarkIndex.furthest_within`. A binary search.
        """
        with self._changed:
            stop, events = self._index.furthest_within(boundary, max_events, limit)
            return stop, events, self._index.boundary_at_or_after(stop + 1)

    def time_bounds(self, time_ms: int) -> tuple[int, int | None]:
        """Where events ingested at or after ``time_ms`` may begin (``WatermarkIndex``'s)."""
        with self._changed:
            return self._index.time_bounds(time_ms)

    def boundary_after(self, offset: int) -> int | None:
        """The least indexed event boundary (an append's end) after ``offset``; None: none."""
        with self._changed:
            return self._index.boundary_at_or_after(offset + 1)

    def remember_boundary(self, offset: int) -> None:
        """Records ``offset`` as an event boundary handed out, keeping the most recent."""
        with self._changed:
            self._read_boundaries[offset] = None
            self._read_boundaries.move_to_end(offset)
            while len(self._read_boundaries) > _REMEMBERED_BOUNDARIES:
                self._read_boundaries.popitem(last=False)

    def wait_at_tail(
        self,
        offset: int,
        known_watermark: int | None,
        timeout_s: float,
        stopping: threading.Event,
    ) -> SegmentSnapshot:
        """Waits up to ``timeout_s`` for data past ``offset``, a seal or a higher watermark.

        ``known_watermark`` defaults to the watermark at ``offset``; the wait
        also ends once ``stopping`` is set and :meth:`wake_readers` is called.
        """
        with self._changed:
            known = self._known(offset, known_watermark)
            self._changed.wait_for(
                lambda: self._tail_moved(offset, known) or stopping.is_set(), timeout=timeout_s
            )
            return self._snapshot()

    def watch_tail(
        self, offset: int, known_watermark: int | None, wake: Callable[[], None]
    ) -> Callable[[], None] | None:
        """Arranges for ``wake()`` once :meth:`wait_at_tail` would return; holds no thread.

        ``wake`` is called once, on the thread that publishes the change (or
        calls :meth:`wake_readers` or :meth:`truncate`), under the segment's
        lock: it must be quick and must not call the store. Returns the
        function that withdraws the watch (harmless once fired), or None
        when there is nothing to wait for (``wake`` is then never called).
        """
        with self._changed:
            known = self._known(offset, known_watermark)
            if self._tail_moved(offset, known):
                return None
            watch = _TailWatch(offset, known, wake)
            self._watches.add(watch)

        def withdraw() -> None:
            with self._changed:
                self._watches.discard(watch)

        return withdraw

    def _known(self, offset: int, known_watermark: int | None) -> int:
        return self._index.watermark_after(offset) if known_watermark is None else known_watermark

    def _tail_moved(self, offset: int, known: int) -> bool:
        return self.committed_end > offset or self._index.latest > known or self.sealed

    def _fire_watches(self, *, everyone: bool) -> None:
        fired = [w for w in self._watches if everyone or self._tail_moved(w.offset, w.known)]
        for watch in fired:
            self._watches.discard(watch)
            try:
                watch.wake()
            except Exception:  # a reader's failure must not fail the publishing thread
                _log.exception("waking a read at the tail of %s failed", self.name)

    def wake_readers(self) -> None:
        """Ends every wait at the tail: the segment is going away or the store closing.

        The segment is :attr:`retired` from then on; its listeners and its
        stream's are told (without a new version), so that whoever follows
        it looks again and finds it gone.
        """
        with self._changed:
            self.retired = True
            self._changed.notify_all()
            self._fire_watches(everyone=True)
            self._listeners.notify()
            if self._stream_changes is not None:
                self._stream_changes.listeners.notify()

    def append_end_within(self, offset: int, limit: int) -> int | None:
        """The last end of an append in ``(offset, limit]`` (an event boundary), or None."""
        with self._changed:
            stop = self._index.boundary_at_or_before(limit)
        return stop if stop > offset else None

    def read_stop(self, offset: int, limit: int) -> int:
        """The last event boundary in ``(offset, limit]``, or the end of the first event.

        ``offset`` is an event boundary at or below the published end.
        """
        stop = self.append_end_within(offset, limit)
        if stop is not None:
            return stop
        stop = scan_end(self.read_bytes, offset, limit)
        self.remember_boundary(stop)
        return stop

    def check_within(self, offset: int, end: int) -> None:
        """Refuses an offset outside ``[0, end]`` of the segment.

        Raises:
            InvalidArgumentError: naming the offset and the segment's range.
        """
        if offset < 0 or offset > end:
            msg = f"offset {offset} is outside segment {self.name!r} (0 to {end})"
            raise InvalidArgumentError(msg)

    def check_readable(self, offset: int) -> None:
        """Refuses an offset before the head (truncated data) or inside an event.

        Raises:
            TruncatedError: ``offset`` is before the first readable offset.
            InvalidArgumentError: ``offset`` is not at an event boundary.
        """
        with self._changed:
            head = self.head
        if offset < head:
            msg = (
                f"segment {self.name!r} was truncated: offset {offset} is gone, "
                f"the first readable offset is {head}"
            )
            raise TruncatedError(msg, self.name, head)
        if offset != head:
            self.check_boundary(offset)

    def check_boundary(self, offset: int) -> None:
        """Refuses an offset inside an event; reads a bounded window (see boundaries.py).

        Raises:
            InvalidArgumentError: ``offset`` is not at an event boundary.
        """
        with self._changed:
            if offset in self._read_boundaries:
                return
            start = max(
                self._index.boundary_at_or_before(offset), self._checkpoints.at_or_before(offset)
            )
        if start == offset:
            return
        if not lands_on_boundary(self.read_bytes, start, offset, STRIDE):
            msg = f"offset {offset} is not at an event boundary of segment {self.name!r}"
            raise InvalidArgumentError(msg)

    def info(self) -> SegmentInfo:
        """The segment's published attributes, with its active writers' last assertions."""
        with self._changed:
            writers = tuple(
                WriterAssertion(writer_id, m.event_time, m.last_seen)
                for writer_id, m in sorted(self._marks.items())
                if m.active and m.event_time is not None
            )
            return SegmentInfo(
                segment=self.name,
                creation_time=self.creation_time,
                last_write_time=self.last_write_time,
                write_offset=self.committed_end,
                sealed=self.sealed,
                watermark=self._index.latest,
                key_low=self.key_low,
                key_high=self.key_high,
                first_offset=self.head,
                event_time_watermark=self._event_index.latest,
                writers=writers,
            )

    def __repr__(self) -> str:
        kind = type(self).__name__
        return f"{kind}({self.name!r}, end={self.committed_end}, sealed={self.sealed})"
