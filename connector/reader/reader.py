"""The event reader: reads the segments its group gives it and yields events and watermarks.

Its segments are read through one fetch session (:class:`SegmentFeed`): one
waiting call for all of them, answered with what changed; a segment answered
with data is read on once its events were taken.

A reader writes its positions to the group's state every sync interval, and
less often while idle, down to one sync every ``max_idle_sync_interval_ms``
(see :mod:`connector.reader.sync_pace` for when and why). When
the store cannot store that write (out of disk space: RESOURCE_EXHAUSTED), the
reader goes on reading the segments it holds, keeps its positions in memory
and tries the sync again every interval; until one succeeds the group's state
keeps the positions last written (see :meth:`EventReader.read_next_event`).
"""

from __future__ import annotations

import bisect
import collections
import logging
import math
import time
from collections.abc import Iterable
from typing import Generic, TypeVar

from connector.background import FailureLog
from connector.client.serializers import Serializer
from connector.errors import ClosedError, InvalidArgumentError, ResourceExhaustedError
from connector.framing import Frame, iter_frames
from connector.groups.percentile import PERFECT, RunCounts
from connector.groups.record import GroupRecord
from connector.groups.state import (
    NO_WRITER,
    GroupState,
    least_event_time,
    watermark_after,
    writers_event_time,
)
from connector.groups.tracking import GroupTimeTracker
from connector.model import ReadResult
from connector.reader.events import EventRead, Position, ReaderConfig
from connector.reader.feed import SegmentFeed
from connector.reader.late_count import LateCount
from connector.reader.lineage import successors_of
from connector.reader.membership import (
    GroupHandle,
    Positions,
    ReaderGroupResetError,
    leave,
    sync,
)
from connector.reader.source.ranges import READ_CHUNK_BYTES
from connector.reader.source.timekeeping import TimeKeeping, is_late, rose
from connector.reader.sync_pace import (
    DEFAULT_MAX_IDLE_SYNC_INTERVAL_MS,
    SyncPace,
    idle_sync_bound_ms,
    waits_for_segments,
)
from connector.reader.unread_work import work_by_segment
from connector.timestamps import END_OF_TIME

__all__ = ["EventReader"]

T = TypeVar("T")
_log = logging.getLogger(__name__)


class _SegmentInput:
    """One held segment: what was consumed, and what is buffered of its last answer.

    The writers' event time is known where a read ends (the store says
    what holds after its data); between the events of one read the least of
    it, the one the read started at and the least in force at any of its
    events (the store's floor) counts, so a writer that joined within the
    read, before its events or after them, holds the group back from the
    read's first event on.

    Its name goes into ``moved`` when it is made and whenever a read is
    absorbed or an event taken, so the reader looks again only at the
    segments that moved.
    """

    def __init__(
        self,
        segment: str,
        offset: int,
        watermark: int,
        end: int | None,
        event_time: int | None,
        moved: set[str],
    ):
        self.segment = segment
        self.consumed_offset = offset
        self.consumed_watermark = watermark
        self.consumed_event_time = event_time
        self.end = end
        self.fetch_offset = offset
        self.buffer_watermark = watermark
        self.buffer_event_time = event_time
        self.inside_event_time = event_time
        self.frames: collections.deque[Frame] = collections.deque()
        self.end_of_segment = False
        self.successors: tuple[str, ...] = ()
        self._moved = moved
        moved.add(segment)

    @property
    def reached_end_cut(self) -> bool:
        return self.end is not None and self.fetch_offset >= self.end

    @property
    def position(self) -> tuple[int, int, int | None]:
        """What was consumed: the offset, and the watermark and writers' event time there."""
        return self.consumed_offset, self.consumed_watermark, self.consumed_event_time

    @property
    def drained(self) -> bool:
        """Read to its end (seal or end cut) and every event consumed."""
        return not self.frames and (self.end_of_segment or self.reached_end_cut)

    @property
    def known(self) -> tuple[int | None, int | None]:
        """The watermark and writers' event time (the store's form) where reading goes on.

        (None, None) while the event time is not known: the next answer tells both.
        """
        event_time = self.buffer_event_time
        if event_time is None:
            return None, None
        return self.buffer_watermark, None if event_time == NO_WRITER else event_time

    @property
    def successors_to_start(self) -> tuple[str, ...]:
        """The successors its finish brings in: those of its seal (none at an end cut)."""
        return self.successors if self.end_of_segment else ()

    def absorb(self, result: ReadResult) -> None:
        """Applies one answer of the segment, read from ``fetch_offset``; the buffer is empty."""
        self._moved.add(self.segment)
        if result.data:
            self.frames.extend(iter_frames(result.data, result.offset))
        self.fetch_offset = result.next_offset
        self.buffer_watermark = max(self.buffer_watermark, result.watermark)
        self.buffer_event_time = writers_event_time(result.event_time_watermark)
        self.inside_event_time = least_event_time(
            self.consumed_event_time,
            writers_event_time(result.event_time_floor),
            self.buffer_event_time,
        )
        self.end_of_segment = result.end_of_segment
        self.successors = result.successors
        if not self.frames:
            self.consumed_watermark = max(self.consumed_watermark, self.buffer_watermark)
            self.consumed_event_time = self.buffer_event_time

    def take(self) -> Frame:
        self._moved.add(self.segment)
        frame = self.frames.popleft()
        self.consumed_offset = frame.end
        after = watermark_after(self.buffer_watermark, frame.ingestion_time, not self.frames)
        if after is not None:
            self.consumed_watermark = max(self.consumed_watermark, after)
        self.consumed_event_time = self.inside_event_time if self.frames else self.buffer_event_time
        return frame


class EventReader(Generic[T]):
    """One member of a reader group; not thread-safe (one thread reads).

    Guarantees, in the ingestion-time domain:

    - watermark reads strictly ascend, through rebalancing, readers joining
      and leaving, and scaling;
    - every event returned after a watermark ``W`` has an ingestion time
      above ``W + max_event_time_lag``;
    - events of one routing key come in the order written, across scaling.

    In the processing-time domain (the default) no watermark read is returned.

    It syncs with its group every ``sync_interval_ms`` while anything moves
    and, while idle, ever less often, down to once every
    ``max_idle_sync_interval_ms`` (at most a quarter of ``lease_ms``); see
    :mod:`connector.reader.sync_pace` for what waits on an idle reader's sync.

    On a full disk the reader goes on: see :meth:`read_next_event`.
    """

    def __init__(
        self,
        group: GroupHandle,
        reader_id: str,
        serializer: Serializer[T],
        config: ReaderConfig,
        *,
        lease_ms: int = 30_000,
        sync_interval_ms: int = 100,
        max_idle_sync_interval_ms: int = DEFAULT_MAX_IDLE_SYNC_INTERVAL_MS,
    ):
        if not reader_id or len(reader_id) > 256:
            msg = f"reader_id must be 1 to 256 characters, got {reader_id!r}"
            raise InvalidArgumentError(msg)
        self.reader_id = reader_id
        self.config = config
        self._time = TimeKeeping.of(
            config.time_domain,
            config.timestamp_assigner,
            config.lag_ms,
            config.watermark_percentile,
        )
        self._group = group
        self._client = group.client
        self._serializer = serializer
        self._lease_ms = lease_ms
        self._pace = SyncPace(
            sync_interval_ms,
            idle_sync_bound_ms(max_idle_sync_interval_ms, sync_interval_ms, lease_ms),
        )
        self._inputs: dict[str, _SegmentInput] = {}
        # What follows the held segments' moves, brought up to date by _note_moves:
        self._moved: set[str] = set()  # held segments that moved since last looked at
        self._unreported: set[str] = set()  # moved since the group's state last took them
        self._drained: set[str] = set()  # read to their ends, every event consumed
        self._ready: list[str] = []  # with events buffered, sorted: the round robin's order
        self._served: str | None = None  # the round robin goes on after it (None: from the start)
        group_time = self._time.group_time
        self._group_time = None if group_time is None else GroupTimeTracker(group_time)
        self._state = GroupState()
        self._record: GroupRecord | None = None  # the group's record as the last sync left it
        self._generation = group.record().generation
        self._last_sync = -math.inf
        self._waiting_for_segments = False  # below its share, with segments to come to it
        self._sync_refused_at: float | None = None  # when the store last refused a sync
        self._sync_failures = FailureLog(
            f"reader {reader_id!r} writing its position to group {group.name!r}", _log
        )
        self._last_emitted: int | None = None
        # The watermark at the percentile over the group's work, asked at each sync (p < 1).
        self._at_percentile: int | None = None
        self._late = LateCount()
        self._closed = False  # no more reads
        self._left = False  # the group no longer lists this reader
        self._feed = SegmentFeed(self._client, max_bytes_per_segment=READ_CHUNK_BYTES)
        self._sync()

    # --- the public API ---------------------------------------------------------

    def read_next_event(self, timeout_ms: int | None = None) -> EventRead[T] | None:
        """The next event or watermark, or None when none came within ``timeout_ms``.

        Blocks up to ``timeout_ms`` (default: the config's read timeout).
        Returns None at once when the group has read everything (a bounded
        group, or sealed streams), after a final END_OF_TIME watermark;
        :attr:`is_finished` then tells that None from a timeout.

        While the store is out of disk space, the group's state cannot be
        written: the reader keeps reading the segments it holds, with its
        positions in memory, and tries the write again every sync interval
        (logged once, and once more when it succeeds). No event is lost or
        returned twice by this reader, and its watermarks still ascend
        strictly. Meanwhile the group takes no new reader and moves no
        segment (each needs a write), a segment read to its end is finished
        (and its successors started) only once a write succeeds, and should
        the reader stop before then, its segments are read again from the
        positions last written (at-least-once).

        Raises:
            ClosedError: the reader is closed.
            ReaderGroupResetError: the group was reset or deleted.
            TruncatedError: the stream was truncated past this reader's
                position; the error names the segment and its first readable
                offset (reset the group, e.g. to the earliest position, to go on).
            DataLossError: the next event of a held segment fails its
                checksum (every event before it was returned); the error names
                the segment and offset, and every later call raises it again.
            StoreUnavailableError: the store, or the cluster behind it, could
                not store the group's state (a JetStream cluster without a quorum).
        """
        if self._closed:
            msg = f"reader {self.reader_id!r} is closed"
            raise ClosedError(msg)
        timeout_s = (self.config.read_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = time.monotonic() + timeout_s
        while True:
            self._note_moves()
            if self._sync_due():
                self._sync()
            watermark = self._watermark_to_emit()
            if watermark is not None:
                return EventRead.of_watermark(watermark)
            event = self._next_event()
            if event is not None:
                return event
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._state.is_done:
                return None
            self._wait_for_changes(self._wait_s(remaining))

    @property
    def is_finished(self) -> bool:
        """Whether the group has read everything and this reader returned all it will.

        True once every segment of the group is finished (a bounded group
        reached its end cut, or the streams are sealed and read) and, in the
        ingestion-time domain, the final END_OF_TIME watermark was returned:
        from then on :meth:`read_next_event` returns None at once. A None
        while this is False was a timeout.
        """
        if not self._state.is_done:
            return False
        return not self._time.has_watermarks or self._last_emitted == END_OF_TIME

    @property
    def last_watermark(self) -> int | None:
        """The last watermark this reader returned."""
        return self._last_emitted

    @property
    def late_count(self) -> LateCount:
        """The events this reader returned and how many were late (compare with the percentile)."""
        return self._late

    @property
    def segments(self) -> list[str]:
        """The segments this reader holds now."""
        return sorted(self._inputs)

    def close(self) -> None:
        """Reports positions, gives its segments back and leaves the group.

        No read is possible once close is called. When the store cannot be
        reached, close raises and may be called again: the reader leaves
        the group only once an update of the group succeeded (or the group
        was reset or deleted meanwhile). Closing a closed reader is harmless.

        Raises:
            StoreUnavailableError: the store could not be reached; call again.
            ResourceExhaustedError: the store is out of disk space; call again
                once it has space. A reader that never leaves keeps its segments
                until its lease runs out; they are then read again from the
                positions last written.
        """
        if self._left:
            return
        self._closed = True
        positions = self._positions()
        me, generation = self.reader_id, self._generation
        try:
            self._group.update(
                lambda record, now: leave(record, me, positions, now, generation=generation)
            )
        except ReaderGroupResetError:
            pass
        self._left = True
        self._feed.close()

    def __enter__(self) -> EventReader[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"EventReader({self.reader_id!r}, group={self._group.name!r}, segments={self.segments})"
        )

    # --- events and watermarks ----------------------------------------------------

    def _next_event(self) -> EventRead[T] | None:
        """The next buffered event, round robin over the held segments in name order.

        The round robin goes on after the segment the last event came from
        and starts again from the first name after each sync.
        """
        ready = self._ready
        while ready:
            at = 0 if self._served is None else bisect.bisect_right(ready, self._served)
            segment = ready[at % len(ready)]
            source = self._inputs[segment]
            if not source.frames:  # taken since it was noted
                ready.remove(segment)
                continue
            frame = source.frames[0]
            event = self._serializer.deserialize(frame.payload)
            event_time = self.config.timestamp_assigner.extract_timestamp(
                event, frame.ingestion_time
            )
            source.take()
            self._served = segment
            late = bool(is_late(event_time, self._last_emitted))
            self._late.count(1, late)
            return EventRead.of_event(
                event,
                event_time,
                frame.ingestion_time,
                Position(segment, frame.offset),
                frame.routing_key,
                late=late,
            )
        return None

    def _watermark_to_emit(self) -> int | None:
        """The watermark to yield now, from the last synced state and this reader's own positions.

        The group's time is kept up to date as positions move and syncs
        come (:class:`GroupTimeTracker`), so this costs nothing per segment;
        below percentile 1 the one at the percentile counts when higher
        (asked of the store at each sync).
        """
        if self._group_time is None:
            return None
        perfect = self._time.watermark_of(self._group_time.least(), self._state.is_done)
        watermark = self._time.higher(perfect, self._at_percentile)
        if not rose(watermark, self._last_emitted):
            return None
        self._last_emitted = watermark
        return watermark

    def _note_moves(self) -> None:
        """Brings what follows the held segments up to date with the ones that moved.

        Only those are looked at: which are drained and which have events
        buffered (those without are read on), their times in the group's,
        and that the next sync reports them.
        """
        kept = self._time.kept
        for segment in self._moved:
            source = self._inputs.get(segment)
            if source is None:
                continue  # released
            if source.drained:
                self._drained.add(segment)
            else:
                self._drained.discard(segment)
            at = bisect.bisect_left(self._ready, segment)
            listed = at < len(self._ready) and self._ready[at] == segment
            if source.frames and not listed:
                self._ready.insert(at, segment)
            elif listed and not source.frames:
                del self._ready[at]
            if not source.frames:
                self._feed.rearm(segment)  # every event of its answer taken: read on
            if self._group_time is not None:
                fresher = kept(source.consumed_watermark, source.consumed_event_time)
                self._group_time.set_fresher(segment, fresher)
        self._unreported |= self._moved
        self._moved.clear()

    # --- reads ------------------------------------------------------------------

    def _hold(self, source: _SegmentInput) -> None:
        """Reads ``source`` on from where its buffer ends, through the fetch session."""
        watermark, event_time = source.known
        self._feed.hold(source.segment, source.fetch_offset, source.end, watermark, event_time)

    def _wait_for_changes(self, timeout_s: float) -> None:
        """Waits up to ``timeout_s`` for the held segments' next changes, and takes them in.

        One call for every held segment. A segment that failed is read
        again by the next wait, as a read of it would be; its error is
        raised once every other answer was taken in.
        """
        if self._feed.idle:
            time.sleep(timeout_s)  # nothing held can change: only the next sync can bring any
            return
        result = self._feed.wait(timeout_s)
        inputs = self._inputs
        for read in result.reads:
            source = inputs.get(read.segment)
            if source is not None:  # else given back meanwhile
                source.absorb(read)
        failed = [(inputs[s], error) for s, error in result.failures if s in inputs]
        for source, _ in failed:
            self._hold(source)
        if failed:
            raise failed[0][1]

    # --- the group ----------------------------------------------------------------

    def _positions(self, segments: Iterable[str] | None = None) -> Positions:
        """The consumed positions of ``segments`` (default: every held segment)."""
        inputs = self._inputs
        chosen = inputs if segments is None else segments
        return {s: inputs[s].position for s in chosen if s in inputs}

    def _sync_due(self) -> bool:
        """Whether to sync now: every interval, or at once when a held segment is drained.

        The interval doubles after each idle sync, up to its bound, and is
        back at once when a held segment moved (:class:`SyncPace`). After the
        store refused a sync, the next comes no sooner than an interval later.
        """
        return self._until_sync_s() <= 0

    def _until_sync_s(self) -> float:
        """How long until :meth:`_sync_due` says yes, at the latest (0: now)."""
        now = time.monotonic()
        refused = self._sync_refused_at
        if refused is not None:
            return max(0.0, refused + self._pace.interval_s - now)
        if self._drained:
            return 0.0
        gap = self._pace.gap_s(moved=bool(self._unreported or self._moved))
        return max(0.0, self._last_sync + gap - now)

    def _wait_s(self, remaining: float) -> float:
        """How long the next wait lasts: up to the next sync, or to ``remaining``.

        An idle sync due within ``remaining`` comes at the end of this wait
        instead, when that is late by at most half its gap
        (:meth:`SyncPace.may_come_late`): the wait is not cut in two calls.
        """
        until = self._until_sync_s()
        if until >= remaining:
            return remaining
        steady = self._sync_refused_at is None and not self._drained
        moved = bool(self._unreported or self._moved)
        if steady and self._pace.may_come_late(remaining - until, moved=moved):
            return remaining
        return until

    def _sync(self) -> None:
        """Reports positions and finished segments, renews the lease, rebalances.

        When the store is out of space for the write, the reader carries on
        with the segments and positions it has (the write is tried again
        later); a reader that has not joined yet has none, so it raises.
        Only the positions that moved since the last sync are sent: the
        group's state holds the others already (only a segment's holder
        moves its position).
        """
        self._note_moves()
        positions = self._positions(self._unreported)
        finished = {
            s: successors_of(self._client, s, self._inputs[s].successors_to_start)
            for s in sorted(self._drained)
        }
        me, generation, lease_ms = self.reader_id, self._generation, self._lease_ms

        def step(record: GroupRecord, now: int) -> GroupRecord:
            return sync(
                record,
                me,
                positions,
                now,
                generation=generation,
                finished=finished,
                lease_ms=lease_ms,
            )

        try:
            record = self._group.update(step)
        except ReaderGroupResetError:
            msg = f"reader group {self._group.name!r} was reset; create a new reader"
            raise ReaderGroupResetError(msg) from None
        except ResourceExhaustedError as refused:
            if self._last_sync == -math.inf:
                raise  # not joined: nothing to read yet
            self._sync_refused_at = time.monotonic()
            self._sync_failures.failed(refused)
            return
        self._sync_refused_at = None
        self._sync_failures.succeeded()
        self._last_sync = time.monotonic()
        self._unreported.clear()
        changed = record is not self._record  # else the group is as the last sync left it
        if changed:
            self._follow(record)
        self._served = None
        self._note_moves()
        at_percentile = self._at_percentile
        self._ask_percentile()
        idle = not (changed or positions or finished) and self._at_percentile == at_percentile
        self._pace.synced(idle=idle and not self._waiting_for_segments)

    def _follow(self, record: GroupRecord) -> None:
        """Takes in the group's record: its state, and the segments this reader holds now."""
        self._record = record
        self._state = record.state
        if self._group_time is not None:
            self._group_time.follow(record.state)
        held = record.holdings.get(self.reader_id, frozenset())
        for segment in self._inputs.keys() - held:
            self._release(segment)
        for segment in held - self._inputs.keys():
            cursor = record.state.cursors[segment]
            source = self._inputs[segment] = _SegmentInput(
                segment, cursor.offset, cursor.watermark, cursor.end, cursor.event_time, self._moved
            )
            self._hold(source)
        self._waiting_for_segments = waits_for_segments(
            len(record.state.cursors),
            len(record.assignments),
            len(record.leases),
            len(held),
            max(map(len, record.holdings.values()), default=0),
        )

    def _ask_percentile(self) -> None:
        """Below percentile 1: the watermark at it, over the group's work from its positions.

        The held segments' positions are this reader's own, the others' the
        group's state's; the store tells the work (one call). When it
        cannot, the perfect watermark holds until the next sync. The run's
        counts are this reader's own (the events it returned, those late)
        over its own segments' work: the events it makes late are only
        those, so each reader keeps its share within ``1 - p`` and no
        reader spends another's allowance.
        """
        if self._time.percentile == PERFECT or not self._time.has_watermarks:
            return
        offsets = {s: source.consumed_offset for s, source in self._inputs.items()}
        work = work_by_segment(self._client, self._state, offsets)
        if work is None:
            self._at_percentile = None
            return
        run = RunCounts(self._late.events, self._late.late)
        mine = [w for s, w in work.items() if s in self._inputs]
        self._at_percentile = self._time.percentile_watermark(
            list(work.values()), self._state.is_done, run, mine
        )

    def _release(self, segment: str) -> None:
        """Gives up a held segment: an answer of it on the way is ignored."""
        del self._inputs[segment]
        self._feed.release(segment)
        self._drained.discard(segment)
        self._unreported.discard(segment)
        at = bisect.bisect_left(self._ready, segment)
        if at < len(self._ready) and self._ready[at] == segment:
            del self._ready[at]
        if self._group_time is not None:
            self._group_time.drop_fresher(segment)
