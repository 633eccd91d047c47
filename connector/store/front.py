"""The store's front: the :class:`~connector.store.storage.Storage` seam, once, over an engine.

:class:`StoreFront` is what the server calls, whatever keeps the data. It
checks every request's names and arguments (:mod:`.requests`), decides every
change from the pending state the engine holds (a stream's creation, scale,
seal and truncation with :mod:`.streams`, writers' assertions and timeouts
with :mod:`.assertions`, an append's duplicates and seal), says every
refusal, serves reads and read plans from the engine's published segments
(:mod:`.reading`) and runs the background tasks every storage has (idle
ticks, writers' timeouts). Its :class:`~connector.store.engine.Engine` does
only what differs: making a decided change durable, keeping the bytes, and
its own operational facts. The file store
(:class:`~connector.store.file.store.SegmentStore`) and the JetStream store
(:class:`~connector.store.jetstream.store.JetStreamStore`) are this front
over their engines.

The promises of each call are stated on :class:`~connector.store.storage.Storage`;
what an acknowledgement means on each storage, on its engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Generic, TypeVar

from connector.background import BackgroundTask, TaskStatus
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    NotFoundError,
    ResourceExhaustedError,
    SegmentSealedError,
)
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
    StreamTails,
    TruncationResult,
)
from connector.names import SegmentId, validate_name
from connector.store.assertions import (
    assertion_is_new,
    assertion_record,
    may_have_silent_writers,
    timeout_record,
)
from connector.store.changes import Listener
from connector.store.config import StorageConfig, StoreObserver
from connector.store.engine import Batch, Creation, Decide, Engine, Riding, Stored
from connector.store.published import PublishedSegment
from connector.store.reading import FollowedSegment, TailReaders, plan
from connector.store.records import (
    Record,
    StreamCreated,
    StreamScaled,
    WatermarkAsserted,
    WritersTimedOut,
)
from connector.store.requests import (
    check_append,
    check_assertion,
    check_cut,
    check_joining,
    check_max_bytes,
    check_plan_limits,
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
from connector.store.unread_work import check_buckets, unread_work

__all__ = ["StoreFront"]

S = TypeVar("S", bound=PublishedSegment)


class StoreFront(Generic[S]):
    """The :class:`~connector.store.storage.Storage` seam over ``engine``; thread-safe.

    Starts the idle advancer and the writers' timeouts when the engine's
    ``polling_period_ms`` is set; :meth:`close` stops them and the engine.
    """

    def __init__(self, engine: Engine[S]):
        self.engine = engine
        self._clock = engine.config.clock
        self._closed = threading.Event()
        self._readers = TailReaders(self._closed)
        self._idle_ticks: BackgroundTask | None = None
        self._writer_timeouts: BackgroundTask | None = None
        period_ms = engine.config.polling_period_ms
        if period_ms is not None:
            self._idle_ticks = BackgroundTask(
                "idle_ticks", self.advance_idle_segments, period_ms=period_ms, clock=self._clock
            ).start()
            if engine.config.writer_idle_timeout_ms > 0:
                self._writer_timeouts = BackgroundTask(
                    "writer_idle_timeouts",
                    self.mark_silent_writers_idle,
                    period_ms=period_ms,
                    clock=self._clock,
                ).start()

    @property
    def config(self) -> StorageConfig:
        """The store's settings (its engine's)."""
        return self.engine.config

    @property
    def observer(self) -> StoreObserver:
        """Told of durable groups, idle ticks and timeouts (metrics); the server sets it."""
        return self.engine.observer

    @observer.setter
    def observer(self, observer: StoreObserver) -> None:
        self.engine.observer = observer

    # --- metadata -------------------------------------------------------------

    def create_scope(self, scope: str) -> None:
        """Creates a scope (see :meth:`Storage.create_scope`)."""
        validate_name("scope", scope)
        if not self.engine.create_scope(scope):
            msg = f"scope {scope!r} already exists"
            raise AlreadyExistsError(msg)

    def create_stream(self, scope: str, stream: str, segment_count: int = 1) -> StreamDescription:
        """Creates a stream (see :meth:`Storage.create_stream`)."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        check_segment_count(segment_count, self.config.max_segments_per_stream)

        def decide() -> StreamCreated:
            self._check_room(segment_count)
            return created_record(scope, stream, segment_count, self._clock.now_ms())

        made = self.engine.create_stream(scope, stream, decide)
        if made is Creation.NO_SCOPE:
            raise _no_scope(scope)
        if made is Creation.TAKEN:
            msg = f"stream {scope}/{stream} already exists"
            raise AlreadyExistsError(msg)
        return self.engine.describe(scope, stream)

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """The stream's segments (see :meth:`Storage.describe_stream`)."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        return self.engine.describe(scope, stream)

    def scale_stream(
        self, scope: str, stream: str, sealed_segments: Sequence[int], split_count: int = 0
    ) -> StreamDescription:
        """Splits or merges segments (see :meth:`Storage.scale_stream`)."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        numbers = list(sealed_segments)

        def decide(entry: StreamEntry[S]) -> StreamScaled:
            now, most = self._clock.now_ms(), self.config.max_segments_per_stream
            record = scale_record(entry, numbers, split_count, now, most)
            self._check_room(len(record.created))
            return record

        self.engine.change(scope, stream, decide)
        return self.engine.describe(scope, stream)

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals the stream's open segments (see :meth:`Storage.seal_stream`)."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        self.engine.change(scope, stream, lambda entry: seal_record(entry, self._clock.now_ms()))
        return self.engine.describe(scope, stream)

    def delete_stream(self, scope: str, stream: str) -> None:
        """Deletes a sealed stream (see :meth:`Storage.delete_stream`)."""
        validate_name("scope", scope)
        validate_name("stream", stream)

        def check(entry: StreamEntry[S]) -> None:
            if not entry.sealed:
                msg = f"stream {scope}/{stream} is not sealed: seal it before deleting it"
                raise FailedPreconditionError(msg)

        self.engine.delete_stream(scope, stream, check)

    def delete_scope(self, scope: str) -> None:
        """Deletes an empty scope (see :meth:`Storage.delete_scope`)."""
        validate_name("scope", scope)

        def check(streams: Sequence[str], state_keys: Sequence[str]) -> None:
            check_scope_empty(scope, streams, state_keys)

        if not self.engine.delete_scope(scope, check):
            raise _no_scope(scope)

    def truncate_stream(self, scope: str, stream: str, cut: Mapping[int, int]) -> TruncationResult:
        """Truncates the stream at ``cut`` (see :meth:`Storage.truncate_stream`)."""
        check_cut(scope, stream, cut)
        record, freed = self.engine.truncate(
            scope, stream, lambda entry: truncation_record(entry, cut)
        )
        removed = tuple(str(SegmentId(scope, stream, n)) for n in record.removed)
        return TruncationResult(removed_segments=removed, bytes_freed=freed)

    def _check_room(self, new_segments: int) -> None:
        """Refuses a change that would take the store past its segment limit."""
        held = self.engine.segment_count()
        limit = self.config.max_segments
        if held + new_segments > limit:
            msg = (
                f"the store holds {held} segments and its limit is {limit} (max_segments; "
                f"tidemark-server --max-segments): {new_segments} more do not fit"
            )
            raise ResourceExhaustedError(msg, cause="segment_limit")

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
        joining: Assertion | None = None,
    ) -> AppendResult:
        """Appends ``events`` and the assertions riding on them (see :meth:`Storage.append`)."""
        target = self.engine.segment(segment)
        check_append(
            segment,
            writer_id,
            first_event_number,
            events,
            routing_keys,
            self.config.max_event_size,
            discarded_from,
        )

        def plan_batch(target: S) -> Batch:
            return _batch(
                target, writer_id, first_event_number, events, routing_keys, discarded_from
            )

        if assertion is None and joining is None:
            return self.engine.append(target, plan_batch).result
        parsed = SegmentId.parse(segment)
        scope, stream = parsed.scope, parsed.stream
        riding = self._riding(scope, stream, writer_id, joining, assertion)
        outcome = self.engine.append(target, plan_batch, riding)
        return replace(
            outcome.result,
            assertion=None if assertion is None else self._asserted(scope, stream, outcome.after),
            joining=None if joining is None else self._asserted(scope, stream, outcome.before),
        )

    def _riding(
        self,
        scope: str,
        stream: str,
        writer_id: str,
        joining: Assertion | None,
        assertion: Assertion | None,
    ) -> Riding[S]:
        """A writer's assertions on an append: ``joining`` before its events, ``assertion`` after.

        Both are checked before anything of the call is stored, the one after
        against the writer's mark before the call (``check_joining`` already
        refused one below ``joining``).
        """
        given = [a for a in (joining, assertion) if a is not None]
        for riding in given:
            check_assertion(scope, stream, writer_id, riding.number, riding.event_time, {})
        if joining is not None:
            check_joining(joining, assertion)

        def check(entry: StreamEntry[S]) -> None:
            for riding in given:
                assertion_is_new(entry, writer_id, riding.number, riding.event_time)

        def decided(riding: Assertion | None) -> Decide[S] | None:
            if riding is None:
                return None
            return self._assertion(writer_id, riding.number, riding.event_time, {})

        return Riding(scope, stream, check, before=decided(joining), after=decided(assertion))

    def assert_watermark(
        self,
        scope: str,
        stream: str,
        writer_id: str,
        number: int,
        event_time: int | None,
        fences: Mapping[str, Fence] | None = None,
    ) -> AssertionResult:
        """Records a writer's assertion (see :meth:`Storage.assert_watermark`)."""
        given = dict(fences or {})
        check_assertion(scope, stream, writer_id, number, event_time, given)
        decide = self._assertion(writer_id, number, event_time, given)
        record = self.engine.change(scope, stream, decide, grouped=True)
        return self._asserted(scope, stream, record)

    def _assertion(
        self, writer_id: str, number: int, event_time: int | None, fences: Mapping[str, Fence]
    ) -> Callable[[StreamEntry[S]], WatermarkAsserted | None]:
        def decide(entry: StreamEntry[S]) -> WatermarkAsserted | None:
            now = self._clock.now_ms()
            return assertion_record(entry, writer_id, number, event_time, fences, now)

        return decide

    def _asserted(self, scope: str, stream: str, record: Record | None) -> AssertionResult:
        """What an assertion did: the segments it reached, or every open one for a duplicate."""
        if isinstance(record, WatermarkAsserted):
            names = tuple(str(SegmentId(scope, stream, s.number)) for s in record.segments)
            return AssertionResult(True, names)
        entry = self.engine.stream(scope, stream)
        names = tuple(s.name for s in entry.segments.values() if not s.pending_sealed)
        return AssertionResult(False, tuple(sorted(names)))

    def mark_silent_writers_idle(self) -> int:
        """Marks silent writers idle (see :meth:`Storage.mark_silent_writers_idle`)."""
        now = self._clock.now_ms()
        timeout = self.config.writer_idle_timeout_ms
        records = self.engine.change_every_stream(
            lambda e: timeout_record(e, now, timeout), among=may_have_silent_writers
        )
        silent = sum(len(r.writer_ids) for r in records if isinstance(r, WritersTimedOut))
        if silent:
            self.observer.timed_out(silent)
        return silent

    def read(
        self,
        segment: str,
        offset: int,
        max_bytes: int = 1024 * 1024,
        wait_ms: int = 0,
        known_watermark: int | None = None,
    ) -> ReadResult:
        """Reads whole events from ``offset`` (see :meth:`Storage.read`)."""
        target = self.engine.segment(segment, offset, known_watermark)
        check_max_bytes(max_bytes)
        return self._readers.read(target, offset, max_bytes, wait_ms, known_watermark)

    def watch_tail(
        self,
        segment: str,
        offset: int,
        known_watermark: int | None,
        wake: Callable[[], None],
    ) -> Callable[[], None] | None:
        """Arranges for ``wake()`` once a read at the tail would return; holds no thread."""
        return self._readers.watch(self.engine.segment(segment), offset, known_watermark, wake)

    def follow(
        self, segment: str, offset: int, known_watermark: int | None, listener: Listener
    ) -> FollowedSegment:
        """Reads of one segment, told of its every change (see :meth:`Storage.follow`)."""
        target = self.engine.segment(segment, offset, known_watermark)
        return self._readers.follow(target, listener)

    def describe_tails(
        self, scope: str, stream: str, incarnation: int = 0, version: int = 0
    ) -> StreamTails:
        """The stream's segments changed after a version, from memory (see the seam's)."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        changes = self.engine.changes(scope, stream)
        known = max(version, 0) if incarnation == changes.incarnation else 0
        current, changed = changes.since(known)
        tails = tuple(segment.tail() for segment in changed)
        now = self._clock.now_ms()
        return StreamTails(scope, stream, changes.incarnation, current, known == 0, tails, now)

    def listen_stream(self, scope: str, stream: str, listener: Listener) -> Callable[[], None]:
        """Tells ``listener`` of every change of the stream's segments (see the seam's)."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        return self.engine.changes(scope, stream).listeners.add(listener)

    def plan_read(
        self,
        segment: str,
        offset: int,
        max_events: int | None = None,
        max_bytes: int | None = None,
        before_time: int | None = None,
        work_buckets: int = 0,
    ) -> PlannedRead:
        """Where a read under a budget would stop (see :meth:`Storage.plan_read`)."""
        target = self.engine.segment(segment, offset)
        check_plan_limits(max_events, max_bytes, before_time)
        check_buckets(work_buckets)
        planned = plan(target, offset, max_events, max_bytes, before_time)
        if not work_buckets:
            return planned
        return replace(planned, work=unread_work(target, offset, work_buckets))

    def segment_info(self, segment: str) -> SegmentInfo:
        """The segment's attributes now (see :meth:`Storage.segment_info`)."""
        return self.engine.latest_segment(segment).info()

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream's (scope, stream), sorted."""
        return self.engine.stream_ids()

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        return self.engine.scopes()

    def list_streams(self, scope: str) -> list[str]:
        """The streams of ``scope`` (see :meth:`Storage.list_streams`)."""
        validate_name("scope", scope)
        names = self.engine.stream_names(scope)
        if names is None:
            raise _no_scope(scope)
        return names

    # --- small durable values (reader group state) ----------------------------

    def state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted."""
        check_state_prefix(prefix)
        return self.engine.state_keys(prefix)

    def get_state(self, key: str, known_revision: int | None = None) -> StateValue:
        """The value stored under ``key``; unchanged, without it, at ``known_revision``.

        See :meth:`Storage.get_state`.
        """
        check_state_key(key)
        return self._state_answer(key, self.engine.get_state(key), known_revision)

    def get_state_at_once(self, key: str, known_revision: int | None = None) -> StateValue | None:
        """:meth:`get_state` without waiting, or None (see :meth:`Storage.get_state_at_once`)."""
        check_state_key(key)
        stored = self.engine.state_at_once(key)
        return None if stored is None else self._state_answer(key, stored, known_revision)

    def _state_answer(self, key: str, stored: Stored, known_revision: int | None) -> StateValue:
        if stored.revision == known_revision:
            return StateValue(key, b"", stored.revision, self._clock.now_ms(), unchanged=True)
        return self._state_value(key, stored)

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, StateValue]:
        """Stores ``value`` if the revision holds (see :meth:`Storage.compare_and_set_state`)."""
        check_state_key(key)
        written, stored = self.engine.compare_and_set_state(key, expected_revision, value)
        return written, self._state_value(key, stored)

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, StateValue]:
        """Deletes the value if the revision holds (see :meth:`Storage.delete_state`)."""
        check_state_key(key)
        deleted, stored = self.engine.delete_state(key, expected_revision)
        return deleted, self._state_value(key, stored)

    def _state_value(self, key: str, stored: Stored) -> StateValue:
        return StateValue(key, stored.value, stored.revision, self._clock.now_ms())

    # --- idle segments and operations -----------------------------------------

    def advance_idle_segments(self) -> int:
        """Ticks idle segments (see :meth:`Storage.advance_idle_segments`)."""
        now = self._clock.now_ms()
        lag = self.config.max_watermark_lag_ms

        def due(segment: S) -> bool:
            return not segment.pending_sealed and now - segment.pending_time > lag

        ticked = self.engine.tick(now, due)
        if ticked:
            self.observer.ticked(ticked)
        return ticked

    @property
    def parked_reads(self) -> int:
        """How many reads wait at a segment's tail now."""
        return self._readers.waiting

    @property
    def accepting_writes(self) -> bool:
        """Whether the store takes changes now: open, and its engine takes them."""
        return not self._closed.is_set() and self.engine.accepting_writes

    def background_status(self) -> list[TaskStatus]:
        """The engine's background tasks, then idle ticks and timeouts if on."""
        tasks = [task for task in (self._idle_ticks, self._writer_timeouts) if task is not None]
        return self.engine.background_status() + [task.status() for task in tasks]

    def journal_size(self) -> int | None:
        """The engine's journal size on disk, in bytes; None where there is none."""
        return self.engine.journal_size()

    def location(self) -> str:
        """Where the engine keeps the data."""
        return self.engine.location()

    def replication(self) -> list[ReplicaState]:
        """How each replicated log of the engine stands."""
        return self.engine.replication()

    def leader_changes(self) -> dict[str, int]:
        """Leader elections of each log since the store started."""
        return self.engine.leader_changes()

    # --- lifecycle ------------------------------------------------------------

    def close(self) -> None:
        """Stops the background tasks and the engine; closing twice is harmless."""
        if self._closed.is_set():
            return
        for task in (self._idle_ticks, self._writer_timeouts):
            if task is not None:
                task.stop()
        self._closed.set()
        self.engine.close()

    def __enter__(self) -> StoreFront[S]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.engine!r})"


def _batch(
    target: PublishedSegment,
    writer_id: str,
    first: int,
    events: Sequence[bytes],
    routing_keys: Sequence[str] | None,
    discarded_from: int | None,
) -> Batch:
    """What of an append ``target`` does not hold yet; refuses a gap, or fresh events to a seal."""
    expected = target.expected_event_number(writer_id)
    duplicates = duplicates_in_batch(
        target.name, writer_id, expected, first, len(events), discarded_from
    )
    fresh = events[duplicates:]
    # After the duplicates: a retry of a batch stored before the segment was sealed is
    # answered as stored, so its writer does not re-route it to the successors and store
    # it twice.
    if fresh and target.pending_sealed:
        msg = f"segment {target.name!r} is sealed"
        raise SegmentSealedError(msg, target.name, target.successors)
    keys = routing_keys[duplicates:] if routing_keys else None
    return Batch(writer_id, first + duplicates, fresh, keys, duplicates)


def _no_scope(scope: str) -> NotFoundError:
    msg = f"scope {scope!r} does not exist"
    return NotFoundError(msg)
