"""The segment store: streams of segments, ingestion time, durability.

:class:`SegmentStore` is the store's API: it validates each request, and for a
change hands a *prepare* step to the :mod:`~connector.store.file.sequencer`, which
orders every change of every segment, stamps temporal operations with the
ingestion clock and commits them in groups (data fsynced, then the journal),
so an acknowledged change is durable and a reader never sees what a crash
could take back. Each change is one typed journal record
(:mod:`~connector.store.records`) applied to the :mod:`~connector.store.file.catalog`;
a :class:`~connector.store.file.segment.Segment` keeps its own data file, watermark
index and lock. The idle advancer gives segments without writes idle ticks, so
their watermarks move (PDP 26). Writers assert event time on a stream
(seed 002, :mod:`~connector.store.assertions`); writers that fall silent are
marked idle after ``writer_idle_timeout_ms``. The advancer, the writers'
timeouts and journal compaction are background tasks
(:mod:`connector.background`): a failed round is logged once, counted and
retried a period later, and :meth:`SegmentStore.background_status` says how
each is doing.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from connector.background import BackgroundTask, TaskStatus
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    NotFoundError,
    SegmentSealedError,
)
from connector.framing import encode_frames
from connector.model import (
    AppendResult,
    Assertion,
    AssertionResult,
    Fence,
    PlannedRead,
    ReadResult,
    ReplicaState,
    SegmentInfo,
    StateValue,
    StreamDescription,
    TruncationResult,
)
from connector.names import SegmentId, validate_name
from connector.store.assertions import (
    assertion_is_new,
    assertion_record,
    marks_after,
    timeout_record,
)
from connector.store.boundaries import checkpoints
from connector.store.config import StoreConfig, StoreObserver, default_open_files
from connector.store.file.catalog import Catalog
from connector.store.file.compaction import Compaction
from connector.store.file.data_dir import DataDirLock
from connector.store.file.disk import domain_error
from connector.store.file.open_files import OpenFiles
from connector.store.file.recovery import open_journal, recover
from connector.store.file.segment import Segment
from connector.store.file.sequencer import Publish, Sequencer
from connector.store.reading import TailReaders, plan
from connector.store.records import (
    Committed,
    ScopeCreated,
    ScopeDeleted,
    StateDeleted,
    StateSet,
    StreamDeleted,
    Ticked,
    WatermarkAsserted,
    WritersTimedOut,
)
from connector.store.requests import (
    check_append,
    check_assertion,
    check_cut,
    check_scope_empty,
    check_segment_count,
    check_state_key,
    check_state_prefix,
    duplicates_in_batch,
)
from connector.store.streams import (
    StreamEntry,
    created_record,
    scale_record,
    seal_record,
    truncation_record,
)

__all__ = ["SegmentStore", "StoreConfig", "StoreObserver"]


def _stream_of(segment: str) -> tuple[str, str]:
    """``(scope, stream)`` of a segment name."""
    parsed = SegmentId.parse(segment)
    return parsed.scope, parsed.stream


_log = logging.getLogger(__name__)

#: How often a failed journal compaction is tried again when the store has no
#: polling period of its own (ms).
COMPACTION_RETRY_MS = 1_000


class SegmentStore:
    """A durable store of streams; thread-safe.

    Every mutating call blocks until its change is durable and visible, then
    returns. Reads never block writers; a read at the tail blocks at most the
    ``wait_ms`` it asks for.
    """

    def __init__(self, config: StoreConfig):
        self.config = config
        self._clock = config.clock
        self.observer = StoreObserver()
        # Held until close(): a second store on this dir is refused (DataDirLockedError).
        self._lock = DataDirLock(config.data_dir)
        try:
            self._open(config)
        except BaseException:
            self._lock.release()
            raise

    def _open(self, config: StoreConfig) -> None:
        """Replays the data dir and starts the sequencer and the background tasks."""
        self._files = OpenFiles(config.max_open_files or default_open_files())
        self._catalog = Catalog(config.data_dir, self._files, config.max_segments)
        self._journal = open_journal(config.data_dir)
        recover(self._catalog, self._journal)
        compaction = Compaction(self._journal, self._catalog, config.compact_after_records)
        # Run between groups, when the journal holds exactly the durable state.
        self._compaction = BackgroundTask(
            "journal_compaction",
            compaction.maybe_compact,
            period_ms=config.polling_period_ms or COMPACTION_RETRY_MS,
            clock=self._clock,
        )
        self._compaction.run_round()
        self._sequencer = Sequencer(
            self._journal,
            apply=self._catalog.apply,
            committed=lambda changes: self.observer.committed(changes),
            between_groups=self._compaction.run_round_if_due,
        )
        self._closed = threading.Event()
        self._readers = TailReaders(self._closed)
        self._idle_ticks: BackgroundTask | None = None
        if config.polling_period_ms is not None:
            self._idle_ticks = BackgroundTask(
                "idle_ticks",
                self.advance_idle_segments,
                period_ms=config.polling_period_ms,
                clock=self._clock,
            ).start()
        self._writer_timeouts: BackgroundTask | None = None
        if config.polling_period_ms is not None and config.writer_idle_timeout_ms > 0:
            self._writer_timeouts = BackgroundTask(
                "writer_idle_timeouts",
                self.mark_silent_writers_idle,
                period_ms=config.polling_period_ms,
                clock=self._clock,
            ).start()

    # --- metadata -------------------------------------------------------------

    def create_scope(self, scope: str) -> None:
        """Creates a scope; raises AlreadyExistsError when it exists."""
        validate_name("scope", scope)

        def prepare() -> Publish:
            if self._catalog.has_scope(scope):
                msg = f"scope {scope!r} already exists"
                raise AlreadyExistsError(msg)
            return self._sequencer.record(ScopeCreated(scope))

        self._sequencer.submit(prepare, barrier=True)

    def create_stream(self, scope: str, stream: str, segment_count: int = 1) -> StreamDescription:
        """Creates a stream whose ``segment_count`` segments split [0, 1) evenly."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        check_segment_count(segment_count)

        def prepare() -> Publish:
            if not self._catalog.has_scope(scope):
                msg = f"scope {scope!r} does not exist"
                raise NotFoundError(msg)
            if self._catalog.has_stream(scope, stream):
                msg = f"stream {scope}/{stream!s} already exists"
                raise AlreadyExistsError(msg)
            self._catalog.check_room(segment_count)
            created = created_record(scope, stream, segment_count, self._clock.now_ms())
            return self._sequencer.record(created)

        self._sequencer.submit(prepare, barrier=True)
        return self.describe_stream(scope, stream)

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """Every segment of the stream, with ranges, epochs and lineage."""
        return self._catalog.stream(scope, stream).describe()

    def scale_stream(
        self, scope: str, stream: str, sealed_segments: Sequence[int], split_count: int = 0
    ) -> StreamDescription:
        """Splits one segment into ``split_count`` or merges adjacent ones (``split_count`` 0).

        The sealed segments' successors start with the watermark their
        creation time gives, which is never below a predecessor's last one.
        """
        numbers = list(sealed_segments)

        def prepare() -> Publish:
            target = self._catalog.stream(scope, stream)
            record = scale_record(target, numbers, split_count, self._clock.now_ms())
            self._catalog.check_room(len(record.created))
            return self._sequencer.record(record)

        self._sequencer.submit(prepare, barrier=True)
        return self.describe_stream(scope, stream)

    def delete_scope(self, scope: str) -> None:
        """Deletes an empty scope: no streams, sealed or not, and no state values (reader groups).

        Raises:
            NotFoundError: the scope does not exist.
            FailedPreconditionError: the scope still has streams or state
                values; the error names them.
        """
        validate_name("scope", scope)

        def prepare() -> Publish:
            streams = self._catalog.stream_names(scope)  # NotFoundError: no such scope
            check_scope_empty(scope, streams, self._catalog.state_keys(""))
            return self._sequencer.record(ScopeDeleted(scope))

        self._sequencer.submit(prepare, barrier=True)

    def delete_stream(self, scope: str, stream: str) -> None:
        """Deletes a sealed stream: its segments, their data files and lineage.

        Once this returns, every call naming the stream or one of its segments
        fails with NOT_FOUND, and the name may be used for a new stream.

        Raises:
            NotFoundError: the stream does not exist.
            FailedPreconditionError: the stream is not sealed (seal it first).
        """

        def prepare() -> Publish:
            target = self._catalog.stream(scope, stream)
            if not target.sealed:
                msg = f"stream {scope}/{stream} is not sealed: seal it before deleting it"
                raise FailedPreconditionError(msg)
            return self._sequencer.record(StreamDeleted(scope, stream))

        self._sequencer.submit(prepare, barrier=True)

    def truncate_stream(self, scope: str, stream: str, cut: Mapping[int, int]) -> TruncationResult:
        """Truncates the stream at ``cut`` (segment number -> offset): data before it goes.

        Each cut segment's data before its offset (an event boundary) becomes
        unreadable; every sealed segment wholly before the cut (all of whose
        successors are in the cut or wholly before it) loses all its data and
        its data file. A read below a segment's first readable offset fails
        with TruncatedError. Truncating at or before an earlier cut changes
        nothing. Lineage stays: a reader at a removed segment's end still
        finds its successors.

        Raises:
            NotFoundError: the stream or a cut segment does not exist.
            InvalidArgumentError: the cut is empty, or an offset is past its
                segment's end or not at an event boundary.
        """
        check_cut(scope, stream, cut)

        def prepare() -> Publish:
            target = self._catalog.stream(scope, stream)
            record = truncation_record(target, cut)
            publish = self._sequencer.record(record)

            def published() -> TruncationResult:
                freed = publish()
                names = tuple(target.segments[n].name for n in record.removed)
                return TruncationResult(removed_segments=names, bytes_freed=freed or 0)

            return published

        return self._sequencer.submit(prepare, barrier=True)

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals every open segment of the stream; readers see each one end."""

        def prepare() -> Publish:
            target = self._catalog.stream(scope, stream)
            record = seal_record(target, self._clock.now_ms())
            for sealing in record.sealed:
                self._sequencer.on_failure(target.segments[sealing.number].begin_seal())
            return self._sequencer.record(record)

        self._sequencer.submit(prepare, barrier=True)
        return self.describe_stream(scope, stream)

    # --- data -----------------------------------------------------------------

    def append(
        self,
        segment: str,
        writer_id: str,
        first_event_number: int,
        events: Sequence[bytes],
        routing_keys: Sequence[str] | None = None,
        discarded_from: int | None = None,
        assertion: Assertion | None = None,
    ) -> AppendResult:
        """Appends ``events`` and returns once they are durable.

        Events this writer already stored in this segment (numbers below the
        next expected one) are skipped and counted as duplicates, so a retried
        batch is never stored twice.

        ``discarded_from`` announces that the writer discarded the numbers from
        there up to ``first_event_number`` without learning whether they were
        stored: the gap is accepted when every number below ``discarded_from``
        is stored, and once this append is, a late copy of a discarded batch is
        a duplicate and is never stored.

        ``assertion`` rides on the append: decided before anything is staged
        (refused, nothing of the call is stored), its record follows the
        events' in the same group commit, and the call returns once both are
        durable (see :meth:`assert_watermark` for what it means).

        Raises:
            SegmentSealedError: the segment is sealed (its successors are named).
            FailedPreconditionError: ``first_event_number`` leaves a gap not
                announced by ``discarded_from``; the riding assertion's stream
                is sealed.
            InvalidArgumentError: the riding assertion is below the writer's
                previous one (both named).
            ResourceExhaustedError: an event is over the size limit.
        """
        target = self._catalog.segment_named(segment)
        check_append(
            segment,
            writer_id,
            first_event_number,
            events,
            routing_keys,
            self.config.max_event_size,
            discarded_from,
        )

        if assertion is not None:
            check_assertion(
                *_stream_of(segment), writer_id, assertion.number, assertion.event_time, {}
            )

        def prepare() -> Publish:
            entry = None if assertion is None else self._catalog.stream(*_stream_of(segment))
            if entry is not None and assertion is not None:  # refused before anything is staged
                assertion_is_new(entry, writer_id, assertion.number, assertion.event_time)
            appended = self._prepare_append(
                target, writer_id, first_event_number, events, routing_keys, discarded_from
            )
            if entry is None or assertion is None:
                return appended
            asserted = self._prepare_assertion(
                entry, writer_id, assertion.number, assertion.event_time, {}
            )

            def published() -> AppendResult:
                result = appended()
                return replace(result, assertion=asserted())

            return published

        return self._sequencer.submit(prepare, barrier=False)

    def _prepare_append(
        self,
        target: Segment,
        writer_id: str,
        first: int,
        events: Sequence[bytes],
        routing_keys: Sequence[str] | None,
        discarded_from: int | None,
    ) -> Publish:
        expected = target.expected_event_number(writer_id)
        duplicates = duplicates_in_batch(
            target.name, writer_id, expected, first, len(events), discarded_from
        )
        fresh = events[duplicates:]
        if not fresh:
            # Before the seal check: a retry of a batch stored before the segment was
            # sealed is answered as stored, so its writer does not re-route it to the
            # successors and store it twice.
            end = target.pending_end
            return lambda: AppendResult(end, 0, 0, duplicates)
        if target.pending_sealed:
            msg = f"segment {target.name!r} is sealed"
            raise SegmentSealedError(msg, target.name, target.successors)
        time_ms = target.next_time(self._clock.now_ms())
        keys = routing_keys[duplicates:] if routing_keys else None
        start = target.pending_end
        last = first + len(events) - 1
        end, undo = target.stage_append(encode_frames(fresh, time_ms, keys), writer_id, last)
        self._sequencer.wrote(target, undo)
        inside = tuple(checkpoints(start, fresh, keys))
        publish = self._sequencer.record(
            Committed(target.name, end, time_ms, writer_id, last, inside, events=len(fresh))
        )

        def published() -> AppendResult:
            publish()
            return AppendResult(end, time_ms, len(fresh), duplicates)

        return published

    def assert_watermark(
        self,
        scope: str,
        stream: str,
        writer_id: str,
        number: int,
        event_time: int | None,
        fences: Mapping[str, Fence] | None = None,
    ) -> AssertionResult:
        """Records ``writer_id``'s assertion ``number`` on every open segment; returns once durable.

        ``event_time``: every later event of the writer has an event time
        above it (seed 002's W_SET; the writer joins the set if it was not
        in it). None marks the writer idle (W_IDLE): it stops holding the
        event-time watermark back until its next assertion. It applies from
        each open segment's end, after every event of the writer stored so
        far, and is a temporal operation there (like an idle tick). A number
        at or below the writer's latest is a duplicate: nothing changes, and
        the result says ``stored=False``. ``fences`` close the gaps of event
        numbers the writer discarded (see :class:`~connector.model.Fence`).

        Raises:
            NotFoundError: no such stream, or a fence's segment.
            FailedPreconditionError: the stream is sealed; a fence leaves a gap.
            InvalidArgumentError: ``event_time`` is below the writer's previous
                assertion (both named), or a malformed argument.
        """
        given = dict(fences or {})
        check_assertion(scope, stream, writer_id, number, event_time, given)

        def prepare() -> Publish:
            target = self._catalog.stream(scope, stream)
            return self._prepare_assertion(target, writer_id, number, event_time, given)

        return self._sequencer.submit(prepare, barrier=False)

    def _prepare_assertion(
        self,
        target: StreamEntry[Segment],
        writer_id: str,
        number: int,
        event_time: int | None,
        fences: Mapping[str, Fence],
    ) -> Callable[[], AssertionResult]:
        times = {n: s.pending_time for n, s in target.segments.items()}
        record = assertion_record(
            target, writer_id, number, event_time, fences, self._clock.now_ms()
        )
        if record is None:
            names = tuple(s.name for s in target.segments.values() if not s.pending_sealed)
            return lambda: AssertionResult(False, tuple(sorted(names)))
        self._stage_marks(target, record, times)
        for segment_number, last in record.fences:
            self._sequencer.on_failure(target.segments[segment_number].stage_fence(writer_id, last))
        publish = self._sequencer.record(record)
        names = tuple(target.segments[s.number].name for s in record.segments)

        def published() -> AssertionResult:
            publish()
            return AssertionResult(True, names)

        return published

    def mark_silent_writers_idle(self) -> int:
        """Marks idle every writer silent for over ``writer_idle_timeout_ms``; returns how many.

        A writer that asserted event time and since neither appended to nor
        asserted on any open segment of the stream for that long (by the
        store's clock) no longer holds the event-time watermark back: a
        crashed writer holds it back for a bounded time, not forever. It
        joins again with its next assertion.

        Raises:
            ResourceExhaustedError: the marks could not be stored (a full
                disk); none was, and the same writers are due again.
            StoreUnavailableError: the store is closed or failed.
        """

        def prepare() -> Publish:
            now = self._clock.now_ms()
            timeout = self.config.writer_idle_timeout_ms
            publishes = []
            silent = 0
            for target in self._catalog.streams():
                times = {n: s.pending_time for n, s in target.segments.items()}
                record = timeout_record(target, now, timeout)
                if record is None:
                    continue
                self._stage_marks(target, record, times)
                publishes.append(self._sequencer.record(record))
                silent += len(record.writer_ids)

            def published() -> int:
                for publish in publishes:
                    publish()
                if silent:
                    self.observer.timed_out(silent)
                return silent

            return published

        return self._sequencer.submit(prepare, barrier=False)

    def _stage_marks(
        self,
        target: StreamEntry[Segment],
        record: WatermarkAsserted | WritersTimedOut,
        times: Mapping[int, int],
    ) -> None:
        """Stages a change of event time in the segments' pending view, undone should it fail."""
        for stamp in record.segments:
            segment = target.segments[stamp.number]
            marks, changed = marks_after(segment.pending_marks(), record, stamp.time_ms)
            for writer_id in changed:
                self._sequencer.on_failure(segment.stage_mark(writer_id, marks[writer_id]))

            def restore_time(segment: Segment = segment) -> None:
                segment.pending_time = times[segment.number]

            self._sequencer.on_failure(restore_time)

    def read(
        self,
        segment: str,
        offset: int,
        max_bytes: int = 1024 * 1024,
        wait_ms: int = 0,
        known_watermark: int | None = None,
    ) -> ReadResult:
        """Reads whole events from ``offset``, at least one if any is there.

        At the tail of an open segment, waits up to ``wait_ms`` and returns
        early when data arrives, the segment is sealed or the watermark rises
        above ``known_watermark`` (by default the one at ``offset``). An empty
        answer still carries the watermark.

        Raises:
            TruncatedError: the stream was truncated past ``offset`` (the
                error names the first readable offset).
            InvalidArgumentError: ``offset`` is negative, past the end or not
                at an event boundary; ``max_bytes`` is not positive.
            ResourceExhaustedError: no file descriptor was left to read with.
            StoreUnavailableError: the data file could not be read.
        """
        try:
            return self._read(segment, offset, max_bytes, wait_ms, known_watermark)
        except OSError as error:  # no descriptor left, or the disk failed under the read
            _log.warning("a read of %s failed: %s", segment, error)
            raise domain_error(error, "the read", "served") from None

    def _read(
        self,
        segment: str,
        offset: int,
        max_bytes: int,
        wait_ms: int,
        known_watermark: int | None,
    ) -> ReadResult:
        target = self._catalog.segment_named(segment)
        return self._readers.read(target, offset, max_bytes, wait_ms, known_watermark)

    def watch_tail(
        self,
        segment: str,
        offset: int,
        known_watermark: int | None,
        wake: Callable[[], None],
    ) -> Callable[[], None] | None:
        """Arranges for ``wake()`` once a read waiting at ``offset`` would return; holds no thread.

        The thread-free twin of :meth:`read`'s wait, for servers that wait
        on an event loop: ``wake`` is called once, from the thread that
        publishes data past ``offset``, a seal or a watermark above
        ``known_watermark`` (by default the one at ``offset``), a truncation,
        or the store's closing. It must be quick and must not call the store
        (scheduling a callback on an event loop is). Returns the function
        that withdraws the watch, to call whether or not it fired; None when
        there is nothing to wait for (read again at once).

        Raises:
            NotFoundError: there is no such segment.
        """
        target = self._catalog.segment_named(segment)
        return self._readers.watch(target, offset, known_watermark, wake)

    def plan_read(
        self,
        segment: str,
        offset: int,
        max_events: int | None = None,
        max_bytes: int | None = None,
        before_time: int | None = None,
    ) -> PlannedRead:
        """Where a read from ``offset`` under a budget would stop, without the data.

        At most ``max_events`` events in ``max_bytes`` bytes (None: no limit),
        none ingested at or after ``before_time`` (None: no limit); see
        :mod:`connector.store.read_plan`.

        Raises:
            TruncatedError: the stream was truncated past ``offset`` (the
                error names the first readable offset).
            InvalidArgumentError: ``offset`` is negative, past the end or not at
                an event boundary; a limit is given and not > 0.
            StoreUnavailableError: the data file could not be read.
        """
        target = self._catalog.segment_named(segment)
        try:
            return plan(target, offset, max_events, max_bytes, before_time)
        except OSError as error:
            _log.warning("a read plan of %s failed: %s", segment, error)
            raise domain_error(error, "the read plan", "served") from None

    def segment_info(self, segment: str) -> SegmentInfo:
        """The segment's creation time, write offset, LAST_WRITE_TIME, seal and watermark."""
        return self._catalog.segment_named(segment).info()

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream's (scope, stream), sorted."""
        return self._catalog.stream_ids()

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        return self._catalog.scopes()

    def list_streams(self, scope: str) -> list[str]:
        """The streams of ``scope``, sorted, sealed ones too.

        Raises:
            NotFoundError: there is no such scope.
            InvalidArgumentError: ``scope`` is not a valid name.
        """
        return self._catalog.stream_names(scope)

    def state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted.

        Raises:
            InvalidArgumentError: ``prefix`` is longer than a key may be.
        """
        check_state_prefix(prefix)
        return self._catalog.state_keys(prefix)

    @property
    def parked_reads(self) -> int:
        """How many reads wait at a segment's tail now."""
        return self._readers.waiting

    @property
    def accepting_writes(self) -> bool:
        """Whether the store takes changes now.

        False once closed or failed, and while its last group failed for want of
        disk space (until a change is stored again: a group that writes nothing,
        such as an idle round with no tick due, says nothing of the disk).
        """
        return not self._closed.is_set() and self._sequencer.accepting_writes

    def background_status(self) -> list[TaskStatus]:
        """How the store's background tasks are doing: compaction, idle ticks and timeouts if on.

        A task whose rounds fail goes on trying every period; its status
        says how many failed, when one last succeeded and whether it is
        stalled (see :mod:`connector.background`).
        """
        tasks = [self._compaction, self._idle_ticks, self._writer_timeouts]
        return [task.status() for task in tasks if task is not None]

    def journal_size(self) -> int:
        """The journal's size on disk, in bytes."""
        return os.path.getsize(os.path.join(self.config.data_dir, "journal.log"))

    def location(self) -> str:
        """The data dir."""
        return self.config.data_dir

    def replication(self) -> list[ReplicaState]:
        """None: one node, one copy."""
        return []

    def leader_changes(self) -> dict[str, int]:
        """None: one node leads everything."""
        return {}

    # --- idle segments --------------------------------------------------------

    def advance_idle_segments(self) -> int:
        """Gives every open segment idle past ``max_watermark_lag_ms`` an idle tick.

        The tick is a persisted temporal operation: it moves LAST_WRITE_TIME
        and the watermark at the segment's tail. Returns how many were ticked.

        Raises:
            ResourceExhaustedError: the ticks could not be stored (a full
                disk); none of them was, and the same segments are due again.
            StoreUnavailableError: the store is closed or failed.
        """

        def prepare() -> Publish:
            now = self._clock.now_ms()
            lag = self.config.max_watermark_lag_ms
            publishes = []
            for segment in self._catalog.segments():
                if segment.pending_sealed or now - segment.pending_time <= lag:
                    continue
                time_ms, undo = segment.stage_time(now)
                self._sequencer.on_failure(undo)
                publishes.append(self._sequencer.record(Ticked(segment.name, time_ms)))

            def published() -> int:
                for publish in publishes:
                    publish()
                if publishes:
                    self.observer.ticked(len(publishes))
                return len(publishes)

            return published

        return self._sequencer.submit(prepare, barrier=False)

    # --- small durable values (reader group state) ----------------------------

    def get_state(self, key: str) -> StateValue:
        """The value stored under ``key``; revision 0 when there is none."""
        check_state_key(key)
        value, revision = self._catalog.state(key)
        return StateValue(key, value, revision, self._clock.now_ms())

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, StateValue]:
        """Stores ``value`` if the revision is still ``expected_revision``; durable on return.

        Returns whether it was written and the value now stored.
        """
        check_state_key(key)

        def prepare() -> Publish:
            _, revision = self._catalog.state(key)
            if revision != expected_revision:
                return lambda: (False, self.get_state(key))
            next_revision = self._catalog.next_state_revision(key)
            publish = self._sequencer.record(StateSet(key, value, next_revision))

            def published() -> tuple[bool, StateValue]:
                publish()
                return True, self.get_state(key)

            return published

        return self._sequencer.submit(prepare, barrier=True)

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, StateValue]:
        """Deletes the value under ``key`` if its revision is still ``expected_revision``.

        Durable on return. Returns whether it was deleted and the value now
        stored (revision 0: none). A value stored under ``key`` afterwards
        (compare-and-set from revision 0) takes a revision above every one the
        deleted value had.
        """
        check_state_key(key)

        def prepare() -> Publish:
            _, revision = self._catalog.state(key)
            if revision == 0 or revision != expected_revision:
                return lambda: (False, self.get_state(key))
            publish = self._sequencer.record(StateDeleted(key, revision))

            def published() -> tuple[bool, StateValue]:
                publish()
                return True, self.get_state(key)

            return published

        return self._sequencer.submit(prepare, barrier=True)

    # --- lifecycle ------------------------------------------------------------

    def close(self) -> None:
        """Stops the sequencer and the advancer and closes files; closing twice is harmless."""
        if self._closed.is_set():
            return
        for task in (self._idle_ticks, self._writer_timeouts):
            if task is not None:
                task.stop()
        self._sequencer.stop()
        self._closed.set()
        for segment in self._catalog.segments():
            segment.wake_readers()
            segment.close()
        self._files.close()
        self._journal.close()
        self._lock.release()

    def __enter__(self) -> SegmentStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SegmentStore(data_dir={self.config.data_dir!r}, streams={len(self._catalog)})"
