"""The file store: a data dir on one machine, the embedded default.

:class:`SegmentStore` is the store's front (:class:`~connector.store.front.StoreFront`)
over a :class:`FileEngine`. The engine hands every change the front decided
to the :mod:`~connector.store.file.sequencer`, which orders every change of
every segment and commits them in groups (data fsynced, then the journal),
so an acknowledged change is durable and a reader never sees what a crash
could take back. Each change is one typed journal record
(:mod:`~connector.store.records`) applied to the
:mod:`~connector.store.file.catalog`; a :class:`~connector.store.file.segment.Segment`
keeps its own data file, watermark index and lock. Journal compaction runs
between groups, as a background task (:mod:`connector.background`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from connector.background import BackgroundTask, TaskStatus
from connector.framing import encode_frames
from connector.model import AppendResult, ReplicaState, StreamDescription
from connector.store.assertions import marks_after
from connector.store.boundaries import checkpoints
from connector.store.changes import StreamChanges
from connector.store.config import StoreConfig, StoreObserver, default_open_files
from connector.store.engine import (
    AppendOutcome,
    Batch,
    Creation,
    Decide,
    PlanBatch,
    Riding,
    Stored,
)
from connector.store.file.catalog import Catalog
from connector.store.file.compaction import Compaction
from connector.store.file.data_dir import DataDirLock
from connector.store.file.open_files import OpenFiles
from connector.store.file.recovery import open_journal, recover
from connector.store.file.segment import Segment
from connector.store.file.sequencer import Publish, Sequencer
from connector.store.front import StoreFront
from connector.store.published import PublishedSegment
from connector.store.records import (
    Committed,
    Record,
    ScopeCreated,
    ScopeDeleted,
    SegmentTime,
    StateDeleted,
    StateSet,
    StreamCreated,
    StreamDeleted,
    StreamScaled,
    StreamSealed,
    StreamTicked,
    StreamTruncated,
    WatermarkAsserted,
    WritersTimedOut,
)
from connector.store.streams import StreamEntry

__all__ = ["FileEngine", "SegmentStore", "StoreConfig"]

_T = TypeVar("_T")

#: The most segments one group commit of a tick round ticks: an append waits for one such
#: group at most, not for a round over thousands of segments.
TICK_GROUP = 512

#: A stream and some of its segments (by number), as a tick round takes them.
_StreamPart = tuple[StreamEntry[Segment], list[tuple[int, Segment]]]

#: How often a failed journal compaction is tried again when the store has no
#: polling period of its own (ms).
COMPACTION_RETRY_MS = 1_000


class FileEngine:
    """The file store's engine: a data dir, a journal and group commit; thread-safe.

    A change returns once it is durable on this machine: its data files
    and then its journal fsynced (group commit). A failed group (a full
    disk) takes its changes back whole and fails every call in it.
    Opening replays the journal (:mod:`.recovery`); a second store on the
    same dir is refused (:class:`~connector.errors.DataDirLockedError`).
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
        """Replays the data dir and starts the sequencer and journal compaction."""
        self._files = OpenFiles(config.max_open_files or default_open_files())
        self._catalog = Catalog(config.data_dir, self._files)
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

    # --- looking up -----------------------------------------------------------

    def stream(self, scope: str, stream: str) -> StreamEntry[Segment]:
        """The stream."""
        return self._catalog.stream(scope, stream)

    def describe(self, scope: str, stream: str) -> StreamDescription:
        """The stream's segments, lineage and epochs."""
        return self._catalog.stream(scope, stream).describe()

    def changes(self, scope: str, stream: str) -> StreamChanges[PublishedSegment]:
        """The record of the stream's changes."""
        return self._catalog.stream(scope, stream).changes

    def segment(self, name: str, offset: int = 0, known_watermark: int | None = None) -> Segment:
        """The segment ``name``: what is published here is all there is."""
        return self._catalog.segment_named(name)

    def latest_segment(self, name: str) -> Segment:
        """The segment ``name``."""
        return self._catalog.segment_named(name)

    def segment_count(self) -> int:
        """How many segments the data dir holds."""
        return self._catalog.segment_count()

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream's (scope, stream), sorted."""
        return self._catalog.stream_ids()

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        return self._catalog.scopes()

    def stream_names(self, scope: str) -> list[str] | None:
        """The streams of ``scope``, sorted; None when there is no such scope."""
        return self._catalog.stream_names(scope)

    # --- changing: each a prepare step on the sequencer's thread ---------------

    def create_scope(self, scope: str) -> bool:
        """Creates ``scope`` with a journal record; False when it exists."""

        def prepare() -> Publish:
            if self._catalog.has_scope(scope):
                return lambda: False
            return _then(self._sequencer.record(ScopeCreated(scope)), lambda: True)

        return self._sequencer.submit(prepare, barrier=True)

    def create_stream(
        self, scope: str, stream: str, decide: Callable[[], StreamCreated]
    ) -> Creation:
        """Creates the stream ``decide`` makes, in a group of its own."""

        def prepare() -> Publish:
            if not self._catalog.has_scope(scope):
                return lambda: Creation.NO_SCOPE
            if self._catalog.has_stream(scope, stream):
                return lambda: Creation.TAKEN
            return _then(self._sequencer.record(decide()), lambda: Creation.CREATED)

        return self._sequencer.submit(prepare, barrier=True)

    def change(
        self, scope: str, stream: str, decide: Decide[Segment], *, grouped: bool = False
    ) -> Record | None:
        """Stores the record ``decide`` makes; ``grouped`` ones share a group with appends."""

        def prepare() -> Publish:
            return self._staged(self._catalog.stream(scope, stream), decide)

        return self._sequencer.submit(prepare, barrier=not grouped)

    def change_every_stream(
        self, decide: Decide[Segment], among: Callable[[StreamEntry[Segment]], bool] | None = None
    ) -> list[Record]:
        """Stores the record ``decide`` makes of each stream ``among`` picks, all in one group."""

        def prepare() -> Publish:
            picked = (e for e in self._catalog.streams() if among is None or among(e))
            staged = [self._staged(entry, decide) for entry in picked]
            return lambda: [r for r in (publish() for publish in staged) if r is not None]

        return self._sequencer.submit(prepare, barrier=False)

    def truncate(
        self, scope: str, stream: str, decide: Callable[[StreamEntry[Segment]], StreamTruncated]
    ) -> tuple[StreamTruncated, int]:
        """Stores the truncation; applying it deletes the data files of the segments it removes."""

        def prepare() -> Publish:
            record = decide(self._catalog.stream(scope, stream))
            publish = self._sequencer.record(record)
            return lambda: (record, publish() or 0)

        return self._sequencer.submit(prepare, barrier=True)

    def delete_stream(
        self, scope: str, stream: str, check: Callable[[StreamEntry[Segment]], object]
    ) -> None:
        """Deletes the stream, its segments, their data files and lineage."""

        def prepare() -> Publish:
            check(self._catalog.stream(scope, stream))
            return self._sequencer.record(StreamDeleted(scope, stream))

        self._sequencer.submit(prepare, barrier=True)

    def delete_scope(
        self, scope: str, check: Callable[[Sequence[str], Sequence[str]], object]
    ) -> bool:
        """Deletes ``scope`` once ``check`` lets it; False when it does not exist."""

        def prepare() -> Publish:
            streams = self._catalog.stream_names(scope)
            if streams is None:
                return lambda: False
            check(streams, self._catalog.state_keys(""))
            return _then(self._sequencer.record(ScopeDeleted(scope)), lambda: True)

        return self._sequencer.submit(prepare, barrier=True)

    def _staged(self, entry: StreamEntry[Segment], decide: Decide[Segment]) -> Publish:
        """Decides a change of ``entry``, stages it in the pending view and queues its record.

        The publish step returns the record (None when there was nothing to
        store). Should the group fail, the pending view goes back.
        """
        times = {n: s.pending_time for n, s in entry.segments.items()}
        record = decide(entry)
        if record is None:
            return lambda: None

        def restore_times() -> None:
            for number, time_ms in times.items():
                entry.segments[number].pending_time = time_ms

        self._sequencer.on_failure(restore_times)
        match record:
            case StreamSealed() | StreamScaled():
                for sealing in record.sealed:
                    self._sequencer.on_failure(entry.segments[sealing.number].begin_seal())
            case WatermarkAsserted() | WritersTimedOut():
                self._stage_marks(entry, record)
        return _then(self._sequencer.record(record), lambda: record)

    def _stage_marks(
        self, entry: StreamEntry[Segment], record: WatermarkAsserted | WritersTimedOut
    ) -> None:
        """Stages a change of event time (and an assertion's fences) in the pending view."""
        for stamp in record.segments:
            segment = entry.segments[stamp.number]
            marks, changed = marks_after(segment.pending_marks(), record, stamp.time_ms)
            for writer_id in changed:
                self._sequencer.on_failure(segment.stage_mark(writer_id, marks[writer_id]))
        if isinstance(record, WatermarkAsserted):
            for number, last in record.fences:
                segment = entry.segments[number]
                self._sequencer.on_failure(segment.stage_fence(record.writer_id, last))

    # --- data -----------------------------------------------------------------

    def append(
        self, target: Segment, plan: PlanBatch[Segment], riding: Riding[Segment] | None = None
    ) -> AppendOutcome:
        """Writes the batch to the data file; its record and the riding ones share a commit."""

        def prepare() -> Publish:
            entry = None
            if riding is not None:  # refused before anything is staged
                entry = self._catalog.stream(riding.scope, riding.stream)
                riding.check(entry)
            batch = plan(target)  # so is the batch (a gap, a seal)
            before = self._staged_riding(entry, None if riding is None else riding.before)
            appended = self._stage_batch(target, batch)
            after = self._staged_riding(entry, None if riding is None else riding.after)

            def published() -> AppendOutcome:  # in the order staged
                joined = before()
                return AppendOutcome(appended(), joined, after())

            return published

        return self._sequencer.submit(prepare, barrier=False)

    def _staged_riding(
        self, entry: StreamEntry[Segment] | None, decide: Decide[Segment] | None
    ) -> Publish:
        """:meth:`_staged` of a change riding on an append, if one rides there."""
        if entry is None or decide is None:
            return lambda: None
        return self._staged(entry, decide)

    def _stage_batch(self, target: Segment, batch: Batch) -> Callable[[], AppendResult]:
        if not batch.events:
            end = target.pending_end
            return lambda: AppendResult(end, 0, 0, batch.duplicates)
        time_ms = target.next_time(self._clock.now_ms())
        keys = batch.routing_keys
        start = target.pending_end
        frames = encode_frames(batch.events, time_ms, keys)
        end, undo = target.stage_append(frames, batch.writer_id, batch.last_event_number)
        self._sequencer.wrote(target, undo)
        inside = tuple(checkpoints(start, batch.events, keys))
        committed = Committed(
            target.name,
            end,
            time_ms,
            batch.writer_id,
            batch.last_event_number,
            inside,
            events=len(batch.events),
        )
        stored = AppendResult(end, time_ms, len(batch.events), batch.duplicates)
        return _then(self._sequencer.record(committed), lambda: stored)

    def tick(self, now_ms: int, due: Callable[[Segment], bool]) -> int:
        """Gives each due segment a persisted tick, in group commits of ``TICK_GROUP`` at most.

        The segments that look due are found without the sequencer (nothing is
        submitted when none is), then ticked ``TICK_GROUP`` at a time, each
        group looked at again on the sequencer: an append arriving during a
        round over thousands of segments waits for one group, not the round.

        Raises:
            ResourceExhaustedError: a group could not be stored (a full disk):
                the groups before it were, its segments and the rest are due
                again.
        """
        ticked = 0
        for group in _groups_of(self._catalog.streams(), due, TICK_GROUP):
            prepare = functools.partial(self._tick_group, now_ms, due, group)
            ticked += self._sequencer.submit(prepare, barrier=False)
        return ticked

    def _tick_group(
        self, now_ms: int, due: Callable[[Segment], bool], group: Sequence[_StreamPart]
    ) -> Publish:
        """The prepare step of a group of ticks: one record a stream part."""
        publishes = []
        ticked = 0
        for entry, segments in group:
            stamps = []
            for number, segment in segments:
                if segment.retired or not due(segment):
                    continue
                time_ms, undo = segment.stage_time(now_ms)
                self._sequencer.on_failure(undo)
                stamps.append(SegmentTime(number, time_ms))
            if stamps:
                record = StreamTicked(entry.scope, entry.stream, tuple(stamps))
                publishes.append(self._sequencer.record(record))
                ticked += len(stamps)

        def published() -> int:
            for publish in publishes:
                publish()
            return ticked

        return published

    # --- small durable values -------------------------------------------------

    def state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted."""
        return self._catalog.state_keys(prefix)

    def get_state(self, key: str) -> Stored:
        """The value stored under ``key``."""
        return Stored(*self._catalog.state(key))

    def state_at_once(self, key: str) -> Stored | None:
        """The value stored under ``key`` from memory; None while the catalog is busy."""
        found = self._catalog.state_at_once(key)
        return None if found is None else Stored(*found)

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, Stored]:
        """Stores ``value`` at the next revision if the revision holds; and the value then."""

        def prepare() -> Publish:
            _, revision = self._catalog.state(key)
            if revision != expected_revision:
                return lambda: (False, self.get_state(key))
            record = StateSet(key, value, self._catalog.next_state_revision(key))
            return _then(self._sequencer.record(record), lambda: (True, self.get_state(key)))

        return self._sequencer.submit(prepare, barrier=True)

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, Stored]:
        """Deletes the value if the revision holds; and the value then (revision 0)."""

        def prepare() -> Publish:
            _, revision = self._catalog.state(key)
            if revision == 0 or revision != expected_revision:
                return lambda: (False, self.get_state(key))
            record = StateDeleted(key, revision)
            return _then(self._sequencer.record(record), lambda: (True, self.get_state(key)))

        return self._sequencer.submit(prepare, barrier=True)

    # --- operations -----------------------------------------------------------

    @property
    def accepting_writes(self) -> bool:
        """False once closed or failed, and while its last group failed for want of disk space.

        That lasts until a change is stored again: a group that writes
        nothing, such as an idle round with no tick due, says nothing of the disk.
        """
        return self._sequencer.accepting_writes

    def background_status(self) -> list[TaskStatus]:
        """Journal compaction's status."""
        return [self._compaction.status()]

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

    def close(self) -> None:
        """Commits what is queued, stops the sequencer, ends tail waits and closes the files."""
        if self._sequencer.stopped.is_set():
            return
        self._sequencer.stop()
        for segment in self._catalog.segments():
            segment.wake_readers()
            segment.close()
        self._files.close()
        self._journal.close()
        self._lock.release()

    def __repr__(self) -> str:
        return f"FileEngine(data_dir={self.config.data_dir!r}, streams={len(self._catalog)})"


class SegmentStore(StoreFront[Segment]):
    """The file store: the store's front over a :class:`FileEngine` on ``config.data_dir``."""

    def __init__(self, config: StoreConfig):
        super().__init__(FileEngine(config))


def _then(publish: Publish, answer: Callable[[], _T]) -> Callable[[], _T]:
    """``publish``, then ``answer()`` for the caller."""

    def published() -> _T:
        publish()
        return answer()

    return published


def _groups_of(
    streams: Iterable[StreamEntry[Segment]], due: Callable[[Segment], bool], size: int
) -> Iterator[list[_StreamPart]]:
    """The segments of ``streams`` that look ``due`` now, in groups of ``size`` at most.

    Read without the sequencer: a segment a change took meanwhile is looked
    at again when its group is prepared.
    """
    group: list[_StreamPart] = []
    count = 0
    for entry in streams:
        looking = [(n, s) for n, s in list(entry.segments.items()) if due(s)]
        while looking:
            part, looking = looking[: size - count], looking[size - count :]
            group.append((entry, part))
            count += len(part)
            if count == size:
                yield group
                group, count = [], 0
    if group:
        yield group
