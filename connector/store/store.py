"""The segment store: streams of segments, ingestion time, durability.

Every change goes through one *sequencer* thread, which serializes the
operations of all segments, stamps temporal operations with the ingestion
clock and commits them in groups: the data of every append in a group is
written, every touched data file is fsynced, then the group's journal records
are written and fsynced once, and only then are the changes published to
readers and the callers answered. An acknowledged append is therefore durable,
and a reader never sees data a crash could take back.

Lock order: the store's ``_meta_lock`` before a segment's ``changed``; the
sequencer holds neither while it does I/O.
"""

from __future__ import annotations

import base64
import logging
import os
import queue
import resource
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from connector._wire import MAX_EVENTS_PER_APPEND
from connector.clock import Clock, SystemClock
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    SegmentSealedError,
    StoreUnavailableError,
    TidemarkError,
    quoted,
)
from connector.framing import HEADER, MAX_ROUTING_KEY_BYTES, encode_frames
from connector.model import (
    AppendResult,
    PlannedRead,
    ReadResult,
    SegmentDescription,
    SegmentInfo,
    StateValue,
    StreamDescription,
)
from connector.names import SegmentId, validate_name
from connector.store.boundaries import (
    SparseBoundaries,
    checkpoints,
    lands_on_boundary,
    whole_frames,
)
from connector.store.disk import domain_error
from connector.store.journal import Journal
from connector.store.open_files import OpenFiles
from connector.store.read_plan import plan_read
from connector.store.segment import Segment
from connector.store.watermark_index import WatermarkIndex

__all__ = ["SegmentStore", "StoreConfig", "StoreObserver"]

_log = logging.getLogger(__name__)

_MAX_SEGMENTS_PER_SCALE = 64
_MAX_GROUP = 4096
_Publish = Callable[[], Any]


@dataclass(frozen=True)
class StoreConfig:
    """How a store behaves.

    Attributes:
        data_dir: where the journal and the segments' data files live.
        clock: the ingestion clock's source of time.
        max_watermark_lag_ms: a segment idle longer than this gets an idle tick.
        polling_period_ms: how often the idle advancer looks; None disables it.
        max_event_size: the largest event accepted, in bytes.
        max_open_files: how many data-file descriptors stay open at most when
            idle (sealed and cold segments' files are closed, least recently
            used first); None takes a quarter of the process's descriptor
            limit, 16 to 1024.
        max_segments: how many segments the store holds at most; a creation
            or a scale that would pass it fails with RESOURCE_EXHAUSTED.
        compact_after_records: the journal is compacted (rewritten as a
            snapshot of the live state) once it holds this many records and
            twice as many as its last snapshot, so a restart replays the live
            state and at most this many records of history.
    """

    data_dir: str
    clock: Clock = field(default_factory=SystemClock)
    max_watermark_lag_ms: int = 10_000
    polling_period_ms: int | None = 1_000
    max_event_size: int = 1024 * 1024
    max_open_files: int | None = None
    max_segments: int = 100_000
    compact_after_records: int = 50_000

    def __post_init__(self) -> None:
        if self.max_watermark_lag_ms < 0:
            msg = f"max_watermark_lag_ms must be >= 0, got {self.max_watermark_lag_ms!r}"
            raise InvalidArgumentError(msg)
        if self.polling_period_ms is not None and self.polling_period_ms <= 0:
            msg = f"polling_period_ms must be > 0 or None, got {self.polling_period_ms!r}"
            raise InvalidArgumentError(msg)
        if self.max_event_size <= 0:
            msg = f"max_event_size must be > 0, got {self.max_event_size!r}"
            raise InvalidArgumentError(msg)
        for name in ("max_open_files", "max_segments", "compact_after_records"):
            value = getattr(self, name)
            if value is None and name == "max_open_files":
                continue
            if not isinstance(value, int) or value < 1:
                msg = f"{name} must be an integer >= 1, got {value!r}"
                raise InvalidArgumentError(msg)


@dataclass
class _Stream:
    scope: str
    stream: str
    epoch: int = 0
    sealed: bool = False
    segments: dict[int, Segment] = field(default_factory=dict)

    def describe(self) -> StreamDescription:
        return StreamDescription(
            scope=self.scope,
            stream=self.stream,
            epoch=self.epoch,
            sealed=self.sealed,
            segments=tuple(
                SegmentDescription(
                    segment=s.name,
                    key_low=s.key_low,
                    key_high=s.key_high,
                    epoch=s.epoch,
                    sealed=s.sealed,
                    creation_time=s.creation_time,
                    predecessors=s.predecessors,
                    successors=s.successors,
                )
                for s in sorted(self.segments.values(), key=lambda s: s.number)
            ),
        )


class StoreObserver:
    """What a store reports as it works (metrics); every method does nothing by default.

    Called on the sequencer thread: an observer must be quick and must not call the store.
    """

    def committed(self, changes: int) -> None:
        """A group of ``changes`` changes was made durable and published."""

    def ticked(self, segments: int) -> None:
        """``segments`` idle segments got an idle tick."""


@dataclass
class _Op:
    prepare: Callable[[], _Publish]
    barrier: bool
    future: Future = field(default_factory=Future)


class SegmentStore:
    """A durable store of streams; thread-safe.

    Every mutating call blocks until its change is durable and visible, then
    returns. Reads never block writers; a read at the tail blocks at most the
    ``wait_ms`` it asks for.
    """

    def __init__(self, config: StoreConfig):
        self.config = config
        self._clock = config.clock
        self._meta_lock = threading.RLock()
        self._scopes: set[str] = set()
        self._streams: dict[tuple[str, str], _Stream] = {}
        # Every live segment by its one spelling: a lookup without parsing (replay does many).
        self._segments: dict[str, Segment] = {}
        self._states: dict[str, tuple[bytes, int]] = {}
        self._files = OpenFiles(config.max_open_files or _default_open_files())
        self._segment_count = 0
        self._dirty: set[Segment] = set()
        # How to take back the pending changes of the group being prepared, should its
        # commit fail: run in reverse, they leave the sequencer's view as it was durable.
        self._undo: list[Callable[[], None]] = []
        self._closed = threading.Event()
        self._failure: BaseException | None = None
        # Set when a group failed for want of disk space; the next durable group clears it.
        self._out_of_space = False
        self.observer = StoreObserver()
        self._journal = _open_data_dir(config.data_dir)
        self._snapshot_records = 0
        self._recovering = True
        self._recover()
        self._recovering = False
        self._maybe_compact()
        self._queue: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._sequencer = threading.Thread(target=self._run, name="tidemark-sequencer", daemon=True)
        self._sequencer.start()
        self._advancer_stop = threading.Event()
        self._advancer: threading.Thread | None = None
        if config.polling_period_ms is not None:
            self._advancer = threading.Thread(
                target=self._advance_periodically, name="tidemark-idle-advancer", daemon=True
            )
            self._advancer.start()

    # --- metadata -------------------------------------------------------------

    def create_scope(self, scope: str) -> None:
        """Creates a scope; raises AlreadyExistsError when it exists."""
        validate_name("scope", scope)

        def prepare() -> _Publish:
            if scope in self._scopes:
                msg = f"scope {scope!r} already exists"
                raise AlreadyExistsError(msg)
            return self._record({"op": "scope", "scope": scope})

        self._submit(prepare, barrier=True)

    def create_stream(self, scope: str, stream: str, segment_count: int = 1) -> StreamDescription:
        """Creates a stream whose ``segment_count`` segments split [0, 1) evenly."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        if not isinstance(segment_count, int) or not 1 <= segment_count <= _MAX_SEGMENTS_PER_SCALE:
            msg = f"segment_count must be 1 to {_MAX_SEGMENTS_PER_SCALE}, got {segment_count!r}"
            raise InvalidArgumentError(msg)

        def prepare() -> _Publish:
            if scope not in self._scopes:
                msg = f"scope {scope!r} does not exist"
                raise NotFoundError(msg)
            if (scope, stream) in self._streams:
                msg = f"stream {scope}/{stream!s} already exists"
                raise AlreadyExistsError(msg)
            self._check_room(segment_count)
            ranges = _even_ranges(0.0, 1.0, segment_count)
            return self._record(
                {
                    "op": "stream",
                    "scope": scope,
                    "stream": stream,
                    "t": self._clock.now_ms(),
                    "segments": [[n, lo, hi] for n, (lo, hi) in enumerate(ranges)],
                }
            )

        self._submit(prepare, barrier=True)
        return self.describe_stream(scope, stream)

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """Every segment of the stream, with ranges, epochs and lineage."""
        with self._meta_lock:
            return self._stream(scope, stream).describe()

    def scale_stream(
        self, scope: str, stream: str, sealed_segments: Sequence[int], split_count: int = 0
    ) -> StreamDescription:
        """Splits one segment into ``split_count`` or merges adjacent ones (``split_count`` 0).

        The sealed segments' successors start with the watermark their
        creation time gives, which is never below a predecessor's last one.
        """
        numbers = list(sealed_segments)

        def prepare() -> _Publish:
            target = self._stream(scope, stream)
            segments = [self._segment_of(target, n) for n in numbers]
            for segment in segments:
                if segment.pending_sealed:
                    msg = f"segment {segment.name!r} is sealed already and cannot be scaled"
                    raise SegmentSealedError(msg, segment.name, segment.successors)
            ranges = _scale_ranges(segments, split_count)
            self._check_room(len(ranges))
            sealed = [[s.number, s.next_time(self._clock.now_ms())] for s in segments]
            first = max(s.number for s in target.segments.values()) + 1
            created = [[first + i, lo, hi] for i, (lo, hi) in enumerate(ranges)]
            return self._record(
                {
                    "op": "scale",
                    "scope": scope,
                    "stream": stream,
                    "sealed": sealed,
                    "created": created,
                    "t": max(self._clock.now_ms(), max(t for _, t in sealed) + 1),
                }
            )

        self._submit(prepare, barrier=True)
        return self.describe_stream(scope, stream)

    def delete_stream(self, scope: str, stream: str) -> None:
        """Deletes a sealed stream: its segments, their data files and lineage.

        Once this returns, every call naming the stream or one of its segments
        fails with NOT_FOUND, and the name may be used for a new stream.

        Raises:
            NotFoundError: the stream does not exist.
            FailedPreconditionError: the stream is not sealed (seal it first).
        """

        def prepare() -> _Publish:
            target = self._stream(scope, stream)
            if not target.sealed:
                msg = f"stream {scope}/{stream} is not sealed: seal it before deleting it"
                raise FailedPreconditionError(msg)
            return self._record({"op": "delete_stream", "scope": scope, "stream": stream})

        self._submit(prepare, barrier=True)

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals every open segment of the stream; readers see each one end."""

        def prepare() -> _Publish:
            target = self._stream(scope, stream)
            if target.sealed:
                msg = f"stream {scope}/{stream} is sealed already"
                raise FailedPreconditionError(msg)
            now = self._clock.now_ms()
            sealed = [
                [s.number, s.next_time(now)]
                for s in target.segments.values()
                if not s.pending_sealed
            ]
            for number, _ in sealed:
                segment = target.segments[number]
                segment.pending_sealed = True
                self._undo.append(lambda segment=segment: setattr(segment, "pending_sealed", False))
            record = {"op": "seal_stream", "scope": scope, "stream": stream, "sealed": sealed}
            return self._record(record)

        self._submit(prepare, barrier=True)
        return self.describe_stream(scope, stream)

    # --- data -----------------------------------------------------------------

    def append(
        self,
        segment: str,
        writer_id: str,
        first_event_number: int,
        events: Sequence[bytes],
        routing_keys: Sequence[str] | None = None,
    ) -> AppendResult:
        """Appends ``events`` and returns once they are durable.

        Events this writer already stored in this segment (numbers below the
        next expected one) are skipped and counted as duplicates, so a retried
        batch is never stored twice.

        Raises:
            SegmentSealedError: the segment is sealed (its successors are named).
            FailedPreconditionError: ``first_event_number`` leaves a gap.
            ResourceExhaustedError: an event is over the size limit.
        """
        target = self._segment_named(segment)
        if not writer_id or len(writer_id) > 256:
            msg = f"writer_id must be 1 to 256 characters, got {quoted(writer_id)}"
            raise InvalidArgumentError(msg)
        if first_event_number < 0:
            msg = f"first_event_number must be >= 0, got {first_event_number!r}"
            raise InvalidArgumentError(msg)
        if not events:
            msg = f"an append to {segment!r} needs at least one event"
            raise InvalidArgumentError(msg)
        if len(events) > MAX_EVENTS_PER_APPEND:
            msg = (
                f"an append to {segment!r} has {len(events)} events, over the limit of "
                f"{MAX_EVENTS_PER_APPEND} per append: send smaller batches"
            )
            raise ResourceExhaustedError(msg)
        if routing_keys and len(routing_keys) != len(events):
            msg = (
                f"an append to {segment!r} has {len(routing_keys)} routing keys for "
                f"{len(events)} events: give none or one per event"
            )
            raise InvalidArgumentError(msg)
        for key in routing_keys or ():
            if len(key.encode()) > MAX_ROUTING_KEY_BYTES:
                msg = f"routing key {key[:40]!r}... is over {MAX_ROUTING_KEY_BYTES} bytes"
                raise InvalidArgumentError(msg)
        limit = self.config.max_event_size
        for position, event in enumerate(events):
            if len(event) > limit:
                msg = (
                    f"event {position} of the batch to {segment!r} has {len(event)} bytes, "
                    f"over the limit of {limit}"
                )
                raise ResourceExhaustedError(msg)

        def prepare() -> _Publish:
            return self._prepare_append(target, writer_id, first_event_number, events, routing_keys)

        return self._submit(prepare, barrier=False)

    def _prepare_append(
        self,
        target: Segment,
        writer_id: str,
        first: int,
        events: Sequence[bytes],
        routing_keys: Sequence[str] | None,
    ) -> _Publish:
        previous_number = target.writer_numbers.get(writer_id)
        expected = (-1 if previous_number is None else previous_number) + 1
        if first > expected:
            msg = (
                f"writer {writer_id!r} sent event number {first} to {target.name!r}, "
                f"but the next one expected is {expected}"
            )
            raise FailedPreconditionError(msg)
        fresh = events[expected - first :]
        duplicates = len(events) - len(fresh)
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
        keys = routing_keys[expected - first :] if routing_keys else None
        previous_end = target.pending_end
        end = target.write(encode_frames(fresh, time_ms, keys))
        inside = checkpoints(previous_end, fresh, keys)
        last = first + len(events) - 1
        target.writer_numbers[writer_id] = last

        def undo() -> None:
            target.roll_back(previous_end)
            if previous_number is None:
                target.writer_numbers.pop(writer_id, None)
            else:
                target.writer_numbers[writer_id] = previous_number

        self._undo.append(undo)
        self._dirty.add(target)
        record: dict[str, Any] = {
            "op": "commit",
            "seg": target.name,
            "end": end,
            "t": time_ms,
            "w": writer_id,
            "e": last,
            "n": len(fresh),
        }
        if inside:
            record["b"] = inside
        publish = self._record(record)

        def published() -> AppendResult:
            publish()
            return AppendResult(end, time_ms, len(fresh), duplicates)

        return published

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
        target = self._segment_named(segment)
        if max_bytes <= 0:
            msg = f"max_bytes must be > 0, got {max_bytes!r}"
            raise InvalidArgumentError(msg)
        snapshot = target.snapshot()
        if offset < 0 or offset > snapshot.committed_end:
            msg = f"offset {offset} is outside segment {segment!r} (0 to {snapshot.committed_end})"
            raise InvalidArgumentError(msg)
        self._check_boundary(target, offset)
        if offset == snapshot.committed_end and not snapshot.sealed and wait_ms > 0:
            snapshot = self._wait_at_tail(target, offset, wait_ms, known_watermark)
        stop = offset
        data = b""
        if offset < snapshot.committed_end:
            stop = self._read_stop(target, offset, min(snapshot.committed_end, offset + max_bytes))
            data = target.read_bytes(offset, stop)
        with target.changed:
            watermark = target.index.watermark_after(stop)
        end_of_segment = snapshot.sealed and stop == snapshot.committed_end
        return ReadResult(
            segment=segment,
            offset=offset,
            next_offset=stop,
            data=data,
            watermark=watermark,
            end_of_segment=end_of_segment,
            successors=target.successors if end_of_segment else (),
        )

    def plan_read(
        self,
        segment: str,
        offset: int,
        max_events: int | None = None,
        max_bytes: int | None = None,
    ) -> PlannedRead:
        """Where a read from ``offset`` under a budget would stop, without the data.

        At most ``max_events`` events in ``max_bytes`` bytes (None: no limit);
        see :mod:`connector.store.read_plan`.

        Raises:
            InvalidArgumentError: ``offset`` is negative, past the end or not at
                an event boundary; a limit is given and not > 0.
            StoreUnavailableError: the data file could not be read.
        """
        target = self._segment_named(segment)
        for name, limit in (("max_events", max_events), ("max_bytes", max_bytes)):
            if limit is not None and limit <= 0:
                msg = f"{name} must be > 0 or None, got {limit!r}"
                raise InvalidArgumentError(msg)
        committed_end = target.snapshot().committed_end
        if offset < 0 or offset > committed_end:
            msg = f"offset {offset} is outside segment {segment!r} (0 to {committed_end})"
            raise InvalidArgumentError(msg)
        try:
            self._check_boundary(target, offset)
            plan = plan_read(target, offset, max_events, max_bytes)
        except OSError as error:
            _log.warning("a read plan of %s failed: %s", segment, error)
            raise domain_error(error, "the read plan", "served") from None
        target.remember_boundary(plan.next_offset)  # where the planner reads or plans next
        return plan

    def _wait_at_tail(
        self, target: Segment, offset: int, wait_ms: int, known_watermark: int | None
    ) -> Any:
        with target.changed:
            known = (
                target.index.watermark_after(offset) if known_watermark is None else known_watermark
            )
            target.changed.wait_for(
                lambda: (
                    target.committed_end > offset
                    or target.index.latest > known
                    or target.sealed
                    or self._closed.is_set()
                ),
                timeout=wait_ms / 1000,
            )
        return target.snapshot()

    def _read_stop(self, target: Segment, offset: int, limit: int) -> int:
        """The last event boundary in ``(offset, limit]``, or the end of the first event."""
        with target.changed:
            stop = target.index.boundary_at_or_before(limit)
        if stop > offset:
            return stop
        stop = self._scan_stop(target, offset, limit)
        target.remember_boundary(stop)
        return stop

    def _scan_stop(self, target: Segment, offset: int, limit: int) -> int:
        """The end of the last whole event in ``(offset, limit]`` (at least one), by scanning."""
        stop = offset + whole_frames(target.read_bytes(offset, limit))
        if stop == offset:  # one event larger than the budget: return it whole
            header = target.read_bytes(offset, offset + HEADER.size)
            stop = offset + HEADER.size + HEADER.unpack(header)[0]
        return stop

    def _check_boundary(self, target: Segment, offset: int) -> None:
        """Refuses an offset inside an event; reads a bounded window (see boundaries.py)."""
        with target.changed:
            start = max(
                target.index.boundary_at_or_before(offset), target.boundaries.at_or_before(offset)
            )
        if start == offset or target.is_known_boundary(offset):
            return
        if not lands_on_boundary(target.read_bytes, start, offset):
            msg = f"offset {offset} is not at an event boundary of segment {target.name!r}"
            raise InvalidArgumentError(msg)

    def segment_info(self, segment: str) -> SegmentInfo:
        """The segment's creation time, write offset, LAST_WRITE_TIME, seal and watermark."""
        return self._segment_named(segment).info()

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream's (scope, stream), sorted."""
        with self._meta_lock:
            return sorted(self._streams)

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        with self._meta_lock:
            return sorted(self._scopes)

    @property
    def accepting_writes(self) -> bool:
        """Whether the store takes changes now.

        False once closed or failed, and while its last group failed for want of
        disk space (until a group is stored again).
        """
        return not (self._closed.is_set() or self._failure is not None or self._out_of_space)

    def journal_size(self) -> int:
        """The journal's size on disk, in bytes."""
        return os.path.getsize(os.path.join(self.config.data_dir, "journal.log"))

    # --- idle segments --------------------------------------------------------

    def advance_idle_segments(self) -> int:
        """Gives every open segment idle past ``max_watermark_lag_ms`` an idle tick.

        The tick is a persisted temporal operation: it moves LAST_WRITE_TIME
        and the watermark at the segment's tail. Returns how many were ticked.
        """

        def prepare() -> _Publish:
            now = self._clock.now_ms()
            lag = self.config.max_watermark_lag_ms
            with self._meta_lock:
                segments = [s for st in self._streams.values() for s in st.segments.values()]
            publishes = [
                self._record({"op": "tick", "seg": s.name, "t": s.next_time(now)})
                for s in segments
                if not s.pending_sealed and now - s.pending_time > lag
            ]

            def published() -> int:
                for publish in publishes:
                    publish()
                if publishes:
                    self.observer.ticked(len(publishes))
                return len(publishes)

            return published

        return self._submit(prepare, barrier=False)

    def _advance_periodically(self) -> None:
        assert self.config.polling_period_ms is not None
        period = self.config.polling_period_ms / 1000
        while not self._advancer_stop.wait(period):
            try:
                self.advance_idle_segments()
            except StoreUnavailableError:
                return

    # --- small durable values (reader group state) ----------------------------

    def get_state(self, key: str) -> StateValue:
        """The value stored under ``key``; revision 0 when there is none."""
        _check_state_key(key)
        with self._meta_lock:
            value, revision = self._states.get(key, (b"", 0))
        return StateValue(key, value, revision, self._clock.now_ms())

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, StateValue]:
        """Stores ``value`` if the revision is still ``expected_revision``; durable on return.

        Returns whether it was written and the value now stored.
        """
        _check_state_key(key)

        def prepare() -> _Publish:
            _, revision = self._states.get(key, (b"", 0))
            if revision != expected_revision:
                return lambda: (False, self.get_state(key))
            encoded = base64.b64encode(value).decode()
            publish = self._record({"op": "state", "key": key, "rev": revision + 1, "v": encoded})

            def published() -> tuple[bool, StateValue]:
                publish()
                return True, self.get_state(key)

            return published

        return self._submit(prepare, barrier=True)

    # --- lifecycle ------------------------------------------------------------

    def close(self) -> None:
        """Stops the sequencer and the advancer and closes files; closing twice is harmless."""
        if self._closed.is_set():
            return
        self._advancer_stop.set()
        if self._advancer is not None:
            self._advancer.join()
        self._queue.put(None)
        self._sequencer.join()
        self._closed.set()
        with self._meta_lock:
            segments = [s for st in self._streams.values() for s in st.segments.values()]
        for segment in segments:
            with segment.changed:
                segment.changed.notify_all()
            segment.close()
        self._files.close()
        self._journal.close()

    def __enter__(self) -> SegmentStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SegmentStore(data_dir={self.config.data_dir!r}, streams={len(self._streams)})"

    # --- the sequencer ----------------------------------------------------------

    def _submit(self, prepare: Callable[[], _Publish], barrier: bool) -> Any:
        if self._closed.is_set() or self._failure is not None:
            msg = (
                "the store is closed"
                if self._failure is None
                else f"the store failed: {self._failure}"
            )
            raise StoreUnavailableError(msg)
        op = _Op(prepare, barrier)
        self._queue.put(op)
        return op.future.result()

    def _run(self) -> None:
        while True:
            ops = [self._queue.get()]
            while len(ops) < _MAX_GROUP:
                try:
                    ops.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            group: list[tuple[_Op, _Publish]] = []
            for op in ops:
                if op is None:
                    self._commit(group)
                    return
                if op.barrier:
                    self._commit(group)
                    group = []
                prepared = self._prepare(op)
                if prepared is not None:
                    group.append((op, prepared))
                if op.barrier:
                    self._commit(group)
                    group = []
            self._commit(group)
            self._maybe_compact()

    def _prepare(self, op: _Op) -> _Publish | None:
        if self._failure is not None:
            op.future.set_exception(StoreUnavailableError(f"the store failed: {self._failure}"))
            return None
        try:
            return op.prepare()
        except TidemarkError as error:
            op.future.set_exception(error)
        except OSError as error:  # the data file's write failed; nothing of it stays
            _log.warning("a change was not stored: %s", error)
            self._note_failure(error)
            op.future.set_exception(domain_error(error, "the change"))
        except Exception as error:  # a bug: report it to the caller, keep serving
            _log.exception("operation failed")
            op.future.set_exception(error)
        return None

    def _commit(self, group: list[tuple[_Op, _Publish]]) -> None:
        """Makes a group durable, then publishes it; or fails all of it and takes it back.

        A group whose data or journal could not be made durable (a full disk, an
        I/O error) is failed whole, its data cut off the files and the
        sequencer's view rolled back, so the store goes on serving reads and
        takes the next change as if the group had never been tried. Only when
        taking it back fails too does the store stop accepting changes.
        """
        undo, self._undo = self._undo, []
        if not group:
            return
        try:
            for segment in self._dirty:
                segment.sync()
            self._journal.sync()
        except OSError as error:
            _log.warning("a group of %d change(s) was not stored: %s", len(group), error)
            self._roll_back(undo)
            self._note_failure(error)
            failure = domain_error(error, "the change")
            for op, _ in group:
                op.future.set_exception(failure)
            return
        finally:
            self._dirty.clear()
        self._out_of_space = False
        self.observer.committed(len(group))
        for op, publish in group:
            try:
                op.future.set_result(publish())
            except Exception as error:
                _log.exception("publishing failed")
                op.future.set_exception(error)

    def _note_failure(self, error: OSError) -> None:
        if isinstance(domain_error(error, "the change"), ResourceExhaustedError):
            self._out_of_space = True

    def _roll_back(self, undo: list[Callable[[], None]]) -> None:
        self._journal.discard()
        try:
            for step in reversed(undo):
                step()
        except OSError as error:
            _log.exception(
                "a failed group could not be taken back; the store stops accepting changes"
            )
            self._failure = error

    def _record(self, record: dict[str, Any]) -> _Publish:
        """Queues ``record`` in the journal; the returned callable applies it."""
        self._journal.add(record)
        return lambda: self._apply(record)

    # --- compaction -----------------------------------------------------------

    def _maybe_compact(self) -> None:
        """Rewrites the journal as a snapshot once it has grown enough (sequencer only).

        Runs between groups, when every change is durable and published, so
        the snapshot is exactly the durable state. A failed rewrite (a full
        disk) leaves the old journal in place and is tried again later.
        """
        records = self._journal.records
        if records < max(self.config.compact_after_records, 2 * self._snapshot_records):
            return
        with self._meta_lock:
            snapshot = self._snapshot()
        try:
            self._journal.rewrite(snapshot)
        except OSError as error:
            _log.warning("the journal was not compacted: %s", error)
            self._snapshot_records = records
            return
        _log.info("compacted the journal: %d records to %d", records, len(snapshot))
        self._snapshot_records = len(snapshot)

    def _snapshot(self) -> list[dict[str, Any]]:
        """The live state as journal records: scopes, streams with their segments, states."""
        records: list[dict[str, Any]] = [{"op": "scope", "scope": s} for s in sorted(self._scopes)]
        for stream in self._streams.values():
            records.append(
                {
                    "op": "stream_state",
                    "scope": stream.scope,
                    "stream": stream.stream,
                    "epoch": stream.epoch,
                    "sealed": stream.sealed,
                    "segments": [_segment_state(s) for s in stream.segments.values()],
                }
            )
        for key, (value, revision) in sorted(self._states.items()):
            records.append(
                {"op": "state", "key": key, "v": base64.b64encode(value).decode(), "rev": revision}
            )
        return records

    def _apply_stream_state(self, record: dict[str, Any]) -> None:
        stream = _Stream(record["scope"], record["stream"], record["epoch"], record["sealed"])
        self._streams[(stream.scope, stream.stream)] = stream
        for state in record["segments"]:
            segment = self._add_segment(
                stream, state["n"], state["lo"], state["hi"], state["t"], tuple(state["pred"])
            )
            segment.epoch = state["ep"]
            segment.successors = tuple(state["succ"])
            segment.sealed = segment.pending_sealed = state["sealed"]
            segment.committed_end = segment.pending_end = state["end"]
            segment.last_write_time = state["lw"]
            segment.pending_time = state["pt"]
            segment.index = WatermarkIndex.restored(*state["idx"], state.get("cnt"))
            segment.boundaries = SparseBoundaries(state.get("b", ()))
            segment.writer_numbers = dict(state["w"])

    # --- applying records (live and at recovery) ------------------------------

    def _apply(self, record: dict[str, Any]) -> None:
        op = record["op"]
        with self._meta_lock:
            if op == "scope":
                self._scopes.add(record["scope"])
            elif op == "stream":
                stream = _Stream(record["scope"], record["stream"])
                self._streams[(stream.scope, stream.stream)] = stream
                for number, low, high in record["segments"]:
                    self._add_segment(stream, number, low, high, record["t"], ())
            elif op == "scale":
                self._apply_scale(record)
            elif op == "stream_state":
                self._apply_stream_state(record)
            elif op == "delete_stream":
                self._apply_delete(record)
            elif op == "seal_stream":
                stream = self._streams[(record["scope"], record["stream"])]
                stream.sealed = True
                for number, time_ms in record["sealed"]:
                    _seal(stream.segments[number], time_ms)
            elif op == "commit":
                segment = self._segment_named(record["seg"])
                segment.writer_numbers[record["w"]] = max(
                    record["e"], segment.writer_numbers.get(record["w"], -1)
                )
                _advance_pending(segment, record["end"], record["t"])
                segment.publish(
                    record["end"],
                    record["t"],
                    checkpoints=record.get("b", ()),
                    events=record.get("n"),
                )
            elif op == "tick":
                segment = self._segment_named(record["seg"])
                _advance_pending(segment, segment.committed_end, record["t"])
                segment.publish(segment.committed_end, record["t"])
            elif op == "state":
                self._states[record["key"]] = (base64.b64decode(record["v"]), record["rev"])
            else:
                msg = f"unknown journal record {op!r}"
                raise FailedPreconditionError(msg)

    def _apply_delete(self, record: dict[str, Any]) -> None:
        removed = self._streams.pop((record["scope"], record["stream"]))
        self._segment_count -= len(removed.segments)
        for segment in removed.segments.values():
            self._segments.pop(segment.name, None)
        for segment in removed.segments.values():
            with segment.changed:
                segment.changed.notify_all()
            segment.close()
        if self._recovering:
            # A stream of the same name may have been created since: its files are live.
            return
        folder = os.path.join(self.config.data_dir, "segments", removed.scope, removed.stream)
        try:
            shutil.rmtree(folder)
        except OSError as error:  # the deletion is durable; the files are only garbage now
            _log.warning("the data files of %s/%s stay: %s", removed.scope, removed.stream, error)

    def _apply_scale(self, record: dict[str, Any]) -> None:
        stream = self._streams[(record["scope"], record["stream"])]
        stream.epoch += 1
        predecessors = tuple(stream.segments[number].name for number, _ in record["sealed"])
        created = []
        for number, low, high in record["created"]:
            created.append(self._add_segment(stream, number, low, high, record["t"], predecessors))
        successors = tuple(s.name for s in created)
        for number, time_ms in record["sealed"]:
            segment = stream.segments[number]
            segment.successors = successors
            _seal(segment, time_ms)

    def _add_segment(
        self,
        stream: _Stream,
        number: int,
        low: float,
        high: float,
        creation_time: int,
        predecessors: tuple[str, ...],
    ) -> Segment:
        folder = os.path.join(self.config.data_dir, "segments", stream.scope, stream.stream)
        os.makedirs(folder, exist_ok=True)
        segment = Segment(
            name=str(SegmentId(stream.scope, stream.stream, number)),
            number=number,
            key_low=low,
            key_high=high,
            epoch=stream.epoch,
            creation_time=creation_time,
            predecessors=predecessors,
            data_path=os.path.join(folder, f"{number}.events"),
            files=self._files,
        )
        stream.segments[number] = segment
        self._segment_count += 1
        self._segments[segment.name] = segment
        return segment

    def _recover(self) -> None:
        records = 0
        for record in self._journal.replay():
            self._apply(record)
            records += 1
        for stream in self._streams.values():
            for segment in stream.segments.values():
                size = segment.data_size()
                if size < segment.committed_end:
                    msg = (
                        f"segment {segment.name!r} has {size} bytes of data but "
                        f"{segment.committed_end} were committed"
                    )
                    raise FailedPreconditionError(msg)
                if size > segment.committed_end:
                    _log.warning(
                        "segment %s: cutting %d unacknowledged bytes",
                        segment.name,
                        size - segment.committed_end,
                    )
                    segment.truncate_to(segment.committed_end)
        _log.info(
            "recovered %d journal records: %d scopes, %d streams",
            records,
            len(self._scopes),
            len(self._streams),
        )

    # --- lookups --------------------------------------------------------------

    def _check_room(self, new_segments: int) -> None:
        """Refuses a change that would take the store past ``max_segments``."""
        limit = self.config.max_segments
        if self._segment_count + new_segments > limit:
            msg = (
                f"the store holds {self._segment_count} segments and its limit is {limit}: "
                f"{new_segments} more do not fit"
            )
            raise ResourceExhaustedError(msg)

    def _stream(self, scope: str, stream: str) -> _Stream:
        validate_name("scope", scope)  # a bad name is refused as such, quoted short
        validate_name("stream", stream)
        with self._meta_lock:
            found = self._streams.get((scope, stream))
        if found is None:
            msg = f"stream {scope}/{stream} does not exist"
            raise NotFoundError(msg)
        return found

    def _segment_of(self, stream: _Stream, number: int) -> Segment:
        found = stream.segments.get(number)
        if found is None:
            msg = f"segment {stream.scope}/{stream.stream}/{number} does not exist"
            raise NotFoundError(msg)
        return found

    def _segment_named(self, name: str) -> Segment:
        with self._meta_lock:
            found = self._segments.get(name)
        if found is not None:
            return found
        parsed = SegmentId.parse(name)  # says what is wrong with the name, or which part is missing
        return self._segment_of(self._stream(parsed.scope, parsed.stream), parsed.number)


def _open_data_dir(data_dir: str) -> Journal:
    """The data dir's journal, the dir made if need be; a dir that cannot be used is refused.

    Raises:
        InvalidArgumentError: ``data_dir`` is a file, on a read-only file
            system, not writable or otherwise unusable (one line, no traceback).
    """
    try:
        os.makedirs(os.path.join(data_dir, "segments"), exist_ok=True)
        return Journal(os.path.join(data_dir, "journal.log"))
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        msg = f"data dir {quoted(data_dir)} cannot be used: {reason}"
        raise InvalidArgumentError(msg) from None


def _segment_state(segment: Segment) -> dict[str, Any]:
    """A segment's durable state, as a compacted journal keeps it."""
    return {
        "n": segment.number,
        "lo": segment.key_low,
        "hi": segment.key_high,
        "ep": segment.epoch,
        "t": segment.creation_time,
        "pred": list(segment.predecessors),
        "succ": list(segment.successors),
        "sealed": segment.sealed,
        "end": segment.committed_end,
        "lw": segment.last_write_time,
        "pt": segment.pending_time,
        "idx": segment.index.entries(),
        "cnt": segment.index.counts(),
        "b": segment.boundaries.entries(),
        "w": segment.writer_numbers,
    }


def _default_open_files() -> int:
    """A quarter of the process's soft descriptor limit, 16 to 1024."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(16, min(1024, soft // 4))


def _seal(segment: Segment, time_ms: int) -> None:
    segment.pending_sealed = True
    _advance_pending(segment, segment.committed_end, time_ms)
    segment.publish(segment.committed_end, time_ms, sealed=True)
    segment.release_writer()


def _advance_pending(segment: Segment, end: int, time_ms: int) -> None:
    """Brings the sequencer's view up to a record (a no-op live, needed at recovery)."""
    segment.pending_end = max(segment.pending_end, end)
    segment.pending_time = max(segment.pending_time, time_ms)


def _even_ranges(low: float, high: float, count: int) -> list[tuple[float, float]]:
    bounds = [low + (high - low) * i / count for i in range(count)] + [high]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _scale_ranges(segments: list[Segment], split_count: int) -> list[tuple[float, float]]:
    """The key ranges of the successors, or InvalidArgumentError naming what is wrong."""
    if len(segments) == 1:
        if not 2 <= split_count <= _MAX_SEGMENTS_PER_SCALE:
            msg = f"a split needs split_count 2 to {_MAX_SEGMENTS_PER_SCALE}, got {split_count!r}"
            raise InvalidArgumentError(msg)
        return _even_ranges(segments[0].key_low, segments[0].key_high, split_count)
    if len(segments) < 1:
        msg = "a scale needs at least one segment to seal"
        raise InvalidArgumentError(msg)
    if split_count != 0:
        msg = f"a merge of {len(segments)} segments takes split_count 0, got {split_count!r}"
        raise InvalidArgumentError(msg)
    ordered = sorted(segments, key=lambda s: s.key_low)
    if len({s.number for s in ordered}) != len(ordered):
        msg = f"a merge names a segment twice: {[s.number for s in segments]!r}"
        raise InvalidArgumentError(msg)
    for left, right in zip(ordered, ordered[1:], strict=False):
        if left.key_high != right.key_low:
            msg = f"segments {left.name!r} and {right.name!r} are not adjacent and cannot merge"
            raise InvalidArgumentError(msg)
    return [(ordered[0].key_low, ordered[-1].key_high)]


def _check_state_key(key: str) -> None:
    if not isinstance(key, str) or not 0 < len(key) <= 512:
        msg = f"state key must be 1 to 512 characters, got {quoted(key)}"
        raise InvalidArgumentError(msg)
