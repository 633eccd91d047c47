"""The JetStream store: Tidemark's streams on a replicated NATS JetStream cluster.

Each Tidemark stream is one JetStream stream (:mod:`.naming`); its state is
the fold of its messages (:mod:`.log`), rebuilt from the cluster by every
server that serves it (:mod:`.follower`), so any server answers any client
and none holds anything the others lack. The catalog and reader-group state
are key-value buckets (:mod:`.catalog`, :mod:`.state`).

Writes are compare-and-sets on the log: an append, an idle tick or a seal
marker is published expecting the last message this server saw of its
segment (JetStream's expected last subject sequence), and a record of the
stream (creation, scale, seal, truncation) expecting the last record. A
publish that loses (another server wrote first) brings the view up to date
and is decided again, so:

- **order and time**: every segment's messages follow each other in the
  order their publishers saw, and each carries the ingestion time its
  publisher stamped, ``max(now, last + 1)``: strictly increasing per
  segment, whichever server's clock stamped it, and never the leader's;
- **no duplicates from retries**: whether a writer's events are stored
  already is decided against every message of the segment, whatever the
  time between the tries (JetStream's message-id window plays no part);
  a server recognises its own publish whose acknowledgement was lost by its
  token;
- **durability**: a publish is acknowledged once a quorum of the stream's
  replicas stored it (with ``sync_interval: always`` on the nodes, fsynced
  it): an acknowledged append survives the loss of any minority of nodes;
- **availability**: while the cluster cannot answer (a leader election, a
  lost quorum) calls retry with backoff for ``unavailable_retry_s`` and
  then fail with UNAVAILABLE, never NOT_FOUND; health reports NOT_SERVING
  while the cluster has no quorum.

Several appends to one segment through one server go one at a time (each
needs the sequence of the previous); through several servers they race and
the losers retry. An append larger than a message is published as an atomic
batch of messages, all or none.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, TypeVar

from connector.background import BackgroundTask, TaskStatus
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    SegmentSealedError,
    StoreUnavailableError,
    TidemarkError,
)
from connector.framing import HEADER, MAX_ROUTING_KEY_BYTES
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
from connector.store.assertions import assertion_is_new, assertion_record, timeout_record
from connector.store.config import StoreObserver
from connector.store.jetstream.cache import PayloadCache
from connector.store.jetstream.catalog import CatalogBucket
from connector.store.jetstream.chunks import split_append
from connector.store.jetstream.config import JetStreamConfig
from connector.store.jetstream.engine import (
    Backoff,
    Engine,
    EngineUnavailable,
    StreamMissing,
    WrongLastSequence,
)
from connector.store.jetstream.follower import Follower
from connector.store.jetstream.followers import PUSH_GRACE_S, Followers
from connector.store.jetstream.messages import (
    Appended,
    TickMessage,
    append_headers,
    fence_headers,
    meta_headers,
    tick_headers,
)
from connector.store.jetstream.monitor import ClusterMonitor
from connector.store.jetstream.naming import (
    meta_subject,
    stream_name,
    stream_subjects,
)
from connector.store.jetstream.segment import JetStreamSegment
from connector.store.jetstream.state import StateBucket
from connector.store.reading import TailReaders, plan
from connector.store.records import (
    Record,
    StreamScaled,
    StreamSealed,
    StreamTruncated,
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

__all__ = ["JetStreamStore"]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Room left in a message for its headers (the append's own, and JetStream's batch headers).
HEADER_ROOM = 16 * 1024
#: How much longer than a call a server's start waits for the cluster (a meta leader's election).
OPEN_GRACE_S = 20.0
#: How often the cluster's health is probed (ms).
PROBE_PERIOD_MS = 500
#: How often every followed stream is checked against its last sequence (ms).
CATCH_UP_PERIOD_MS = 1_000


class JetStreamStore:
    """Streams of segments on a JetStream cluster; the :class:`~connector.store.Storage` seam.

    Opening connects to the cluster, makes the store's buckets if need be
    and rebuilds every stream of the namespace from its messages; it fails
    with :class:`~connector.errors.StoreUnavailableError` when the cluster
    cannot be reached, and with :class:`~connector.errors.InvalidArgumentError`
    when its messages are too small for ``max_event_size``.
    """

    def __init__(self, config: JetStreamConfig):
        self.config = config
        self._clock = config.clock
        self.observer = StoreObserver()
        self._cache = PayloadCache(config.read_cache_bytes)
        self._closed = threading.Event()
        self._readers = TailReaders(self._closed)
        self._tasks: list[Future[None]] = []
        self._engine = Engine(config, on_connection=self._connection_changed)
        self._catalog = CatalogBucket(self._engine, config.namespace)
        self._states = StateBucket(self._engine, config.namespace)
        self._monitor = ClusterMonitor(self._engine, config.namespace)
        self._followers = Followers(
            self._engine, self._cache, self._catalog, config.namespace, config.unavailable_retry_s
        )
        try:
            self._engine.connect()
            self._check_payload_room()
            self._engine.run(self._open())
        except BaseException:
            self._engine.close()
            raise
        self._probe = BackgroundTask(
            "jetstream_probe", self._monitor.probe, period_ms=PROBE_PERIOD_MS, clock=self._clock
        )
        self._catch_up = BackgroundTask(
            "jetstream_catch_up",
            self._followers.catch_up_round,
            period_ms=CATCH_UP_PERIOD_MS,
            clock=self._clock,
        )
        for task in (self._probe, self._catch_up):
            self._tasks.append(self._engine.spawn(task.run_periodically()))
        self._idle_ticks: BackgroundTask | None = None
        self._writer_timeouts: BackgroundTask | None = None
        if config.polling_period_ms is not None:
            self._idle_ticks = BackgroundTask(
                "idle_ticks",
                self.advance_idle_segments,
                period_ms=config.polling_period_ms,
                clock=self._clock,
            ).start()
            if config.writer_idle_timeout_ms > 0:
                self._writer_timeouts = BackgroundTask(
                    "writer_idle_timeouts",
                    self.mark_silent_writers_idle,
                    period_ms=config.polling_period_ms,
                    clock=self._clock,
                ).start()

    # --- opening ------------------------------------------------------------------------

    def _check_payload_room(self) -> None:
        room = self._engine.max_payload - HEADER_ROOM
        largest = HEADER.size + 2 + MAX_ROUTING_KEY_BYTES + self.config.max_event_size
        if largest > room:
            msg = (
                f"max_event_size {self.config.max_event_size} does not fit the cluster's messages: "
                f"its max_payload is {self._engine.max_payload} bytes and an event takes up to "
                f"{largest + HEADER_ROOM} with its frame, routing key and headers; raise the "
                "nats-server max_payload (8MB is what the local cluster sets) or lower "
                "max_event_size"
            )
            raise InvalidArgumentError(msg)

    async def _open(self) -> None:
        """Makes the buckets and follows every stream; tried again while the cluster elects."""
        backoff = Backoff(self.config.unavailable_retry_s + OPEN_GRACE_S)
        while True:
            try:
                await self._catalog.ensure(self.config.replicas)
                await self._states.ensure(self.config.replicas)
                break
            except EngineUnavailable as error:
                await backoff.after(error)
        await self._monitor.start()
        while True:
            try:
                await self._followers.start(self.config.request_timeout_s)
                return
            except EngineUnavailable as error:
                await self._followers.stop()
                await backoff.after(error)

    def _connection_changed(self, up: bool) -> None:
        self._monitor.connection_changed(up)

    # --- running on the engine ------------------------------------------------------------

    def _run(self, work: Coroutine[Any, Any, _T]) -> _T:
        if self._closed.is_set():
            work.close()
            msg = "the store is closed"
            raise StoreUnavailableError(msg)
        return self._engine.run(work)

    def _retrying(self, attempt: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        """``attempt()`` on the loop, tried again with backoff while the cluster is unavailable."""

        async def tries() -> _T:
            backoff = Backoff(self.config.unavailable_retry_s)
            while True:
                try:
                    return await attempt()
                except EngineUnavailable as error:
                    await backoff.after(error)

        return self._run(tries())

    def _sync(self, follower: Follower) -> None:
        """Brings ``follower`` up to everything its stream held when this was called."""
        self._run(self._followers.sync(follower))

    # --- finding streams and segments ---------------------------------------------------------

    def _follower(self, scope: str, stream: str) -> Follower:
        validate_name("scope", scope)
        validate_name("stream", stream)
        found = self._followers.get(scope, stream)
        if found is not None:
            return found
        ref = self._retrying(lambda: self._catalog.stream(scope, stream))
        if ref is None:
            msg = f"stream {scope}/{stream} does not exist"
            raise NotFoundError(msg)
        return self._run(self._followers.follow(ref))

    def _segment(self, name: str) -> tuple[Follower, JetStreamSegment]:
        parsed = SegmentId.parse(name)
        follower = self._follower(parsed.scope, parsed.stream)
        try:
            return follower, follower.log.segment_named(name)
        except NotFoundError:
            self._sync(follower)  # created a moment ago through another server?
        return follower, follower.log.segment_named(name)

    def _at_offset(
        self,
        follower: Follower,
        segment: JetStreamSegment,
        offset: int,
        known_watermark: int | None = None,
    ) -> None:
        """Brings the view of ``segment`` up to date when the caller has seen beyond it.

        That is when ``offset`` lies past its end, or the watermark the
        caller knows at the tail is above this server's (it read through
        another server, which saw a later tick): a client moving between
        servers never reads a segment going back.
        """
        snapshot = segment.snapshot()
        if offset > snapshot.committed_end or (
            known_watermark is not None
            and offset == snapshot.committed_end
            and known_watermark > snapshot.watermark
        ):
            self._sync(follower)

    def _gone(self, follower: Follower) -> NotFoundError | StoreUnavailableError:
        """What a stream JetStream says is missing is: deleted (NOT_FOUND), or not reachable."""
        ref = self._retrying(lambda: self._catalog.stream(*follower.log.entry_names))
        if ref is None or ref.uid != follower.uid:
            self._run(self._followers.unfollow(follower.log.entry_names))
            return NotFoundError(f"stream {follower.log.name} does not exist")
        return StoreUnavailableError(
            f"the JetStream stream of {follower.log.name} cannot be reached"
        )

    def _check_room(self, new_segments: int) -> None:
        held = self._followers.segment_count()
        limit = self.config.max_segments
        if held + new_segments > limit:
            msg = (
                f"the store holds {held} segments and its limit is {limit}: "
                f"{new_segments} more do not fit"
            )
            raise ResourceExhaustedError(msg)

    # --- metadata ---------------------------------------------------------------------------

    def create_scope(self, scope: str) -> None:
        """Creates a scope; raises AlreadyExistsError when it exists."""
        validate_name("scope", scope)
        token = uuid.uuid4().hex
        if not self._retrying(lambda: self._catalog.create_scope(scope, token)):
            msg = f"scope {scope!r} already exists"
            raise AlreadyExistsError(msg)

    def create_stream(self, scope: str, stream: str, segment_count: int = 1) -> StreamDescription:
        """Creates a stream whose ``segment_count`` segments split [0, 1) evenly.

        Its JetStream stream is made first, with its creation record; the
        stream exists once the catalog names it (a compare-and-set, so of
        two servers creating it one does).
        """
        validate_name("scope", scope)
        validate_name("stream", stream)
        check_segment_count(segment_count)
        if not self._retrying(lambda: self._catalog.has_scope(scope)):
            msg = f"scope {scope!r} does not exist"
            raise NotFoundError(msg)
        if self._retrying(lambda: self._catalog.stream(scope, stream)) is not None:
            msg = f"stream {scope}/{stream} already exists"
            raise AlreadyExistsError(msg)
        self._check_room(segment_count)
        uid = uuid.uuid4().hex[:20]
        record = created_record(scope, stream, segment_count, self._clock.now_ms())
        self._retrying(lambda: self._engine.create_stream(self._stream_config(uid)))
        self._retrying(lambda: self._publish_creation(uid, record))
        ref = self._retrying(lambda: self._catalog.create_stream(scope, stream, uid))
        orphan = stream_name(self.config.namespace, uid)
        if ref is None:
            self._retrying(lambda: self._engine.delete_stream(orphan))
            msg = f"stream {scope}/{stream} already exists"
            raise AlreadyExistsError(msg)
        if not self._retrying(lambda: self._catalog.has_scope(scope)):  # deleted meanwhile
            self._retrying(lambda: self._catalog.delete_stream(ref))
            self._retrying(lambda: self._engine.delete_stream(orphan))
            msg = f"scope {scope!r} does not exist"
            raise NotFoundError(msg)
        follower = self._run(self._followers.follow(ref))
        return self._describe(follower)

    def _stream_config(self, uid: str) -> dict[str, Any]:
        namespace = self.config.namespace
        return {
            "name": stream_name(namespace, uid),
            "subjects": [stream_subjects(namespace, uid)],
            "num_replicas": self.config.replicas,
            "storage": "file",
            "retention": "limits",
            "discard": "old",
            "max_msgs": -1,
            "max_bytes": -1,
            "max_age": 0,
            "max_msgs_per_subject": -1,
            "max_msg_size": -1,
            "allow_direct": True,
            "allow_atomic": True,
            "deny_delete": True,
            "deny_purge": False,
            "description": "a Tidemark stream",
        }

    async def _publish_creation(self, uid: str, record: Record) -> None:
        subject = meta_subject(self.config.namespace, uid)
        try:
            await self._engine.publish(subject, b"", meta_headers(record), 0)
        except WrongLastSequence:
            return  # stored by an earlier try whose answer was lost

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """Every segment of the stream, with ranges, epochs and lineage, as the cluster has it."""
        follower = self._follower(scope, stream)
        self._sync(follower)
        return self._describe(follower)

    def _describe(self, follower: Follower) -> StreamDescription:
        with follower.log.locked():
            return follower.log.entry.describe()

    def scale_stream(
        self, scope: str, stream: str, sealed_segments: Sequence[int], split_count: int = 0
    ) -> StreamDescription:
        """Splits one segment into ``split_count`` or merges adjacent ones (``split_count`` 0).

        The scale record and a seal marker on each sealed segment are one
        atomic batch, each expecting the last message its server saw: no
        append lands on a sealed segment after its seal.
        """
        numbers = list(sealed_segments)
        follower = self._follower(scope, stream)

        def planned(entry: StreamEntry[JetStreamSegment]) -> Record:
            record = scale_record(entry, numbers, split_count, self._clock.now_ms())
            self._check_room(len(record.created))
            return record

        self._change(follower, planned)
        return self._describe(follower)

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals every open segment of the stream; readers see each one end."""
        follower = self._follower(scope, stream)
        self._change(follower, lambda entry: seal_record(entry, self._clock.now_ms()))
        return self._describe(follower)

    def delete_scope(self, scope: str) -> None:
        """Deletes an empty scope: no streams, sealed or not, and no state values (reader groups).

        The scope's key goes first, then the scope is looked at again: a
        stream or a value made meanwhile (through another server) brings it
        back and the deletion fails, as creating a stream checks its scope
        again once made.

        Raises:
            NotFoundError: the scope does not exist.
            FailedPreconditionError: the scope still has streams or state
                values; the error names them.
        """
        validate_name("scope", scope)
        revision = self._retrying(lambda: self._catalog.scope_revision(scope))
        if revision is None:
            msg = f"scope {scope!r} does not exist"
            raise NotFoundError(msg)
        self._refuse_if_held(scope)
        if not self._retrying(lambda: self._catalog.delete_scope(scope, revision)):
            if self._retrying(lambda: self._catalog.has_scope(scope)):
                self._refuse_if_held(scope)
                msg = f"scope {scope!r} changed while it was being deleted: try again"
                raise FailedPreconditionError(msg)
            return  # deleted by an earlier try whose answer was lost
        try:
            self._refuse_if_held(scope)
        except FailedPreconditionError:
            self._retrying(lambda: self._catalog.create_scope(scope, uuid.uuid4().hex))
            raise

    def _refuse_if_held(self, scope: str) -> None:
        streams = self._retrying(lambda: self._catalog.stream_names(scope))
        check_scope_empty(scope, streams, self._retrying(lambda: self._states.keys("")))

    def truncate_stream(self, scope: str, stream: str, cut: Mapping[int, int]) -> TruncationResult:
        """Truncates the stream at ``cut`` (segment number -> offset): data before it goes.

        As on the file store: reads before a cut segment's new head fail with
        TruncatedError, and the messages of every sealed segment wholly
        before the cut are purged but its seal marker, so a reader at its
        end still finds its successors.
        """
        check_cut(scope, stream, cut)
        follower = self._follower(scope, stream)
        self._sync(follower)
        seq, record = self._change(follower, lambda entry: truncation_record(entry, cut))
        assert isinstance(record, StreamTruncated)
        removed = [follower.log.segment(n) for n in record.removed]
        freed = 0
        for segment in removed:
            try:
                self._retrying(
                    lambda s=segment: self._engine.purge_subject(follower.stream_name, s.subject, 1)
                )
            except StoreUnavailableError as error:  # the data is unreadable; only its bytes stay
                _log.warning("%s: its messages stay for now: %s", segment.name, error)
                continue
            freed += segment.committed_end
        return TruncationResult(tuple(s.name for s in removed), freed)

    def delete_stream(self, scope: str, stream: str) -> None:
        """Deletes a sealed stream: its name from the catalog, then its JetStream stream.

        Once this returns, every call naming the stream through this server
        fails with NOT_FOUND, and through the others as soon as their catalog
        watch sees the deletion (milliseconds); the name may be used again.

        Raises:
            NotFoundError: the stream does not exist.
            FailedPreconditionError: the stream is not sealed (seal it first).
        """
        follower = self._follower(scope, stream)
        self._sync(follower)
        if not follower.log.entry.sealed:
            msg = f"stream {scope}/{stream} is not sealed: seal it before deleting it"
            raise FailedPreconditionError(msg)
        tried = False
        while True:
            ref = self._retrying(lambda: self._catalog.stream(scope, stream))
            if ref is None or ref.uid != follower.uid:
                if tried:
                    break  # our own deletion, whose answer was lost
                msg = f"stream {scope}/{stream} does not exist"
                raise NotFoundError(msg)
            tried = True
            if self._retrying(lambda r=ref: self._catalog.delete_stream(r)):
                break
        try:
            self._retrying(lambda: self._engine.delete_stream(follower.stream_name))
        except StoreUnavailableError as error:  # deleted from the catalog: only garbage stays
            _log.warning("the JetStream stream %s stays for now: %s", follower.stream_name, error)
        self._run(self._followers.unfollow((scope, stream)))

    def _change(
        self,
        follower: Follower,
        planned: Callable[[StreamEntry[JetStreamSegment]], Record | None],
    ) -> tuple[int, Record | None]:
        """Publishes the stream record ``planned`` makes, with the segment messages it needs.

        A record that seals segments comes after a seal marker on each of
        them, one that changes segments' event time after a fence on each;
        every message expects the last one its server saw of its subject
        (the record, the stream's last record), all in one atomic batch.
        When another server wrote first, the view is brought up to date and
        the record planned again. Returns the batch's last sequence and the
        record (0 and None when ``planned`` found nothing to store).
        """
        backoff = Backoff(self.config.unavailable_retry_s)
        log = follower.log
        synced = False
        while True:
            with log.locked():
                meta_seq = log.meta_seq
                last_seqs = {n: s.last_seq for n, s in log.entry.segments.items()}
                entry = log.snapshot()
            try:
                record = planned(entry)
            except TidemarkError:
                if synced:
                    raise
                # Refused by this server's view: look at the cluster's before saying so.
                self._sync(follower)
                synced = True
                continue
            if record is None:
                return 0, None
            messages = [
                (entry.segments[n].subject, b"", {**headers, **_expecting(last_seqs[n])})
                for n, headers in _segment_messages(entry, record)
            ]
            meta = meta_subject(self.config.namespace, follower.uid)
            messages.append((meta, b"", {**meta_headers(record), **_expecting(meta_seq)}))
            try:
                seq = self._run(self._engine.publish_atomic(messages))
            except WrongLastSequence:
                self._sync(follower)
                synced = True
                continue
            except EngineUnavailable as error:
                self._run(backoff.after(error))
                self._sync(follower)
                synced = True
                continue
            except StreamMissing:
                raise self._gone(follower) from None
            self._run(self._followers.caught_up(follower, seq, PUSH_GRACE_S))
            return seq, record

    # --- data -----------------------------------------------------------------------------

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
        """Appends ``events`` (see :meth:`_append`), then the assertion riding on them.

        The assertion is decided against this server's view first, so one
        refused (a fall, a sealed stream) stores nothing, and an append
        refused for its own reasons publishes no assertion. It is published
        after the events, as :meth:`assert_watermark` publishes it: two
        atomic publishes, in order, and the call returns once both are
        durable. A failure between them leaves the events stored without
        the assertion, and the call fails; its retry finds the events
        duplicates and stores the assertion, so neither is stored twice.
        Only a change another server makes between the check and the second
        publish (a seal, or the same writer id asserting there) can refuse
        the assertion after its events were stored; the call then fails
        with that refusal, and a retry of the events finds them stored.
        """
        if assertion is None:
            return self._append(
                segment, writer_id, first_event_number, events, routing_keys, discarded_from
            )
        parsed = SegmentId.parse(segment)
        check_assertion(
            parsed.scope, parsed.stream, writer_id, assertion.number, assertion.event_time, {}
        )
        follower = self._follower(parsed.scope, parsed.stream)
        with follower.log.locked():
            assertion_is_new(
                follower.log.snapshot(), writer_id, assertion.number, assertion.event_time
            )
        result = self._append(
            segment, writer_id, first_event_number, events, routing_keys, discarded_from
        )
        asserted = self.assert_watermark(
            parsed.scope, parsed.stream, writer_id, assertion.number, assertion.event_time
        )
        return replace(result, assertion=asserted)

    def _append(
        self,
        segment: str,
        writer_id: str,
        first_event_number: int,
        events: Sequence[bytes],
        routing_keys: Sequence[str] | None = None,
        discarded_from: int | None = None,
    ) -> AppendResult:
        """Appends ``events`` and returns once a quorum of replicas stored them.

        Events this writer already stored in this segment (numbers below the
        next expected one, counted over every message of the segment) are
        skipped and counted as duplicates, so a retried batch is never stored
        twice, through this server or another. ``discarded_from`` announces
        a discarded gap as on the file store.

        Raises:
            SegmentSealedError: the segment is sealed (its successors are named).
            FailedPreconditionError: ``first_event_number`` leaves a gap not
                announced by ``discarded_from``.
            ResourceExhaustedError: an event is over the size limit.
            StoreUnavailableError: the cluster did not store it within
                ``unavailable_retry_s`` (a retry of the same batch is safe).
        """
        follower, target = self._segment(segment)
        check_append(
            segment,
            writer_id,
            first_event_number,
            events,
            routing_keys,
            self.config.max_event_size,
            discarded_from,
        )
        token = uuid.uuid4().hex
        backoff = Backoff(self.config.unavailable_retry_s)
        tried: tuple[int, int] | None = None  # (appended, duplicates) of a publish of unknown fate
        synced = False
        with target.publishing:
            while True:
                last_seq = target.last_seq  # first: the state read below is at least this one's
                expected = target.expected_event_number(writer_id)
                try:
                    duplicates = duplicates_in_batch(
                        target.name,
                        writer_id,
                        expected,
                        first_event_number,
                        len(events),
                        discarded_from,
                    )
                except FailedPreconditionError:
                    if synced:
                        raise
                    # The writer's previous batch may have gone through another server.
                    self._sync(follower)
                    synced = True
                    continue
                fresh = events[duplicates:]
                if not fresh:
                    mine = target.last_append_of(writer_id)
                    if tried is not None and mine is not None and mine.token == token:
                        return AppendResult(mine.end, mine.time_ms, *tried)
                    # Before the seal check, as on the file store: a retry of a batch
                    # stored before the seal is answered as stored.
                    return AppendResult(target.snapshot().committed_end, 0, 0, duplicates)
                if target.pending_sealed:
                    msg = f"segment {target.name!r} is sealed"
                    raise SegmentSealedError(msg, target.name, target.successors)
                keys = routing_keys[duplicates:] if routing_keys else None
                chunks = self._chunks(
                    target, writer_id, first_event_number + duplicates, fresh, keys, token
                )
                tried = (len(fresh), duplicates)
                try:
                    stored = self._run(self._publish_appends(follower, target, chunks, last_seq))
                except WrongLastSequence:
                    self._sync(follower)
                    continue
                except EngineUnavailable as error:
                    self._run(backoff.after(error))
                    self._sync(follower)
                    continue
                except StreamMissing:
                    raise self._gone(follower) from None
                self.observer.committed(1)
                return AppendResult(stored.end, stored.time_ms, len(fresh), duplicates)

    def _chunks(
        self,
        target: JetStreamSegment,
        writer_id: str,
        first: int,
        events: Sequence[bytes],
        keys: Sequence[str] | None,
        token: str,
    ) -> list[tuple[bytes, Appended]]:
        return split_append(
            events,
            keys,
            self._engine.max_payload - HEADER_ROOM,
            first,
            target.snapshot().committed_end,
            target.next_time(self._clock.now_ms()),
            writer_id,
            token,
        )

    async def _publish_appends(
        self,
        follower: Follower,
        target: JetStreamSegment,
        chunks: list[tuple[bytes, Appended]],
        last_seq: int,
    ) -> Appended:
        messages = []
        for i, (frames, message) in enumerate(chunks):
            headers = append_headers(
                message.time_ms,
                message.start,
                message.events,
                message.writer_id,
                message.last_event_number,
                message.token,
                message.checkpoints,
            )
            if i == 0:
                headers.update(_expecting(last_seq))
            messages.append((target.subject, frames, headers))
        seq = await self._engine.publish_atomic(messages)
        # An atomic batch takes consecutive sequences: the first is len - 1 before the last.
        for offset, (frames, message) in enumerate(chunks, seq - len(chunks) + 1):
            self._cache.put(follower.stream_name, offset, frames)
            follower.log.apply_published(offset, target.subject, message)
        return chunks[-1][1]

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

        Decided by :mod:`connector.store.assertions` as on the file store; the
        record goes in one atomic batch with a fence on each segment it
        changes, so it lands after every event of the writer this server saw
        stored, and is decided again when another server wrote first.
        """
        given = dict(fences or {})
        check_assertion(scope, stream, writer_id, number, event_time, given)
        follower = self._follower(scope, stream)
        seq, record = self._change(
            follower,
            lambda entry: assertion_record(
                entry, writer_id, number, event_time, given, self._clock.now_ms()
            ),
        )
        if record is None:
            names = [s.name for s in follower.log.segments() if not s.pending_sealed]
            return AssertionResult(False, tuple(sorted(names)))
        assert isinstance(record, WatermarkAsserted)
        return AssertionResult(
            True, tuple(follower.log.segment(s.number).name for s in record.segments)
        )

    def mark_silent_writers_idle(self) -> int:
        """Marks idle every writer silent for over ``writer_idle_timeout_ms``; returns how many.

        Every server runs this: the record expects the stream's last record
        and fences every segment it changes, so of servers timing out the
        same writers one does, and an append or assertion that came first
        makes the others look again.
        """
        now = self._clock.now_ms()
        timeout = self.config.writer_idle_timeout_ms
        silent = 0
        for follower in self._followers.all():
            _, record = self._change(follower, lambda entry: timeout_record(entry, now, timeout))
            if isinstance(record, WritersTimedOut):
                silent += len(record.writer_ids)
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
        """Reads whole events from ``offset``, at least one if any is there.

        An offset beyond what this server has seen of the segment is first
        looked for in the cluster (another server may have written it).
        Otherwise as on the file store: at the tail of an open segment, waits
        up to ``wait_ms``; an empty answer still carries the watermark.
        """
        follower, target = self._segment(segment)
        self._at_offset(follower, target, offset, known_watermark)
        return self._readers.read(target, offset, max_bytes, wait_ms, known_watermark)

    def watch_tail(
        self,
        segment: str,
        offset: int,
        known_watermark: int | None,
        wake: Callable[[], None],
    ) -> Callable[[], None] | None:
        """Arranges for ``wake()`` once a read waiting at ``offset`` would return; holds no thread.

        ``wake`` is called from the engine's loop when this server's follower
        applies data past ``offset``, a seal, a higher watermark or a
        truncation, or when the store closes or the stream goes.
        """
        _, target = self._segment(segment)
        return self._readers.watch(target, offset, known_watermark, wake)

    def plan_read(
        self,
        segment: str,
        offset: int,
        max_events: int | None = None,
        max_bytes: int | None = None,
        before_time: int | None = None,
    ) -> PlannedRead:
        """Where a read from ``offset`` under a budget would stop, without the data."""
        follower, target = self._segment(segment)
        self._at_offset(follower, target, offset)
        return plan(target, offset, max_events, max_bytes, before_time)

    def segment_info(self, segment: str) -> SegmentInfo:
        """The segment's creation time, write offset, LAST_WRITE_TIME, seal and watermark, now.

        Everything written before this call, through any server, is counted.
        """
        follower, target = self._segment(segment)
        self._sync(follower)
        return target.info()

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream this server follows, sorted (every stream of the catalog, once watched)."""
        return self._followers.names()

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        return self._retrying(self._catalog.scopes)

    def list_streams(self, scope: str) -> list[str]:
        """The streams of ``scope``, sorted, sealed ones too.

        Raises:
            NotFoundError: there is no such scope.
        """
        validate_name("scope", scope)
        if not self._retrying(lambda: self._catalog.has_scope(scope)):
            msg = f"scope {scope!r} does not exist"
            raise NotFoundError(msg)
        return self._retrying(lambda: self._catalog.stream_names(scope))

    # --- small durable values ------------------------------------------------------------

    def state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted."""
        check_state_prefix(prefix)
        return self._retrying(lambda: self._states.keys(prefix))

    def get_state(self, key: str) -> StateValue:
        """The value stored under ``key``; revision 0 when there is none."""
        check_state_key(key)
        stored = self._retrying(lambda: self._states.get(key))
        return StateValue(key, stored.value, stored.revision, self._clock.now_ms())

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, StateValue]:
        """Stores ``value`` if the revision is still ``expected_revision``; durable on return.

        A try whose answer the cluster lost and that finds the value and the
        revision it would have left counts as written.
        """
        check_state_key(key)
        backoff = Backoff(self.config.unavailable_retry_s)
        unknown = False
        while True:
            try:
                written = self._run(self._states.compare_and_set(key, expected_revision, value))
                break
            except EngineUnavailable as error:
                unknown = True
                self._run(backoff.after(error))
        current = self.get_state(key)
        if not written and unknown:
            written = current.revision == expected_revision + 1 and current.value == value
        return written, current

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, StateValue]:
        """Deletes the value under ``key`` if its revision is still ``expected_revision``.

        Durable on return. Returns whether it was deleted and the value now
        stored (revision 0: none). A value stored under ``key`` afterwards
        takes a revision above every one the deleted value had.
        """
        check_state_key(key)
        backoff = Backoff(self.config.unavailable_retry_s)
        unknown = False
        while True:
            try:
                deleted = self._run(self._states.delete(key, expected_revision))
                break
            except EngineUnavailable as error:
                unknown = True
                self._run(backoff.after(error))
        current = self.get_state(key)
        if not deleted and unknown:  # a try whose answer was lost may have deleted it
            stored = self._retrying(lambda: self._states.get(key))
            deleted = stored.revision == 0 and stored.last_revision == expected_revision
        return deleted, current

    # --- idle segments and operations -----------------------------------------------------

    def advance_idle_segments(self) -> int:
        """Gives every open segment idle past ``max_watermark_lag_ms`` an idle tick.

        Every server runs this; a tick is published expecting the segment's
        last message, so of servers ticking one segment at once one does,
        and an append that came first makes the others' ticks fail
        harmlessly. Returns how many ticks this server stored.
        """
        now = self._clock.now_ms()
        lag = self.config.max_watermark_lag_ms
        held: list[tuple[Follower, JetStreamSegment, int, int]] = []
        try:
            for follower in self._followers.all():
                for segment in follower.log.segments():
                    if segment.pending_sealed or now - segment.pending_time <= lag:
                        continue
                    if not segment.publishing.acquire(blocking=False):
                        continue  # an append is under way: not idle
                    held.append((follower, segment, segment.last_seq, segment.next_time(now)))
            if not held:
                return 0
            ticked = self._run(self._tick_all(held))
        finally:
            for _, segment, _, _ in held:
                segment.publishing.release()
        if ticked:
            self.observer.ticked(ticked)
        return ticked

    async def _tick_all(self, held: list[tuple[Follower, JetStreamSegment, int, int]]) -> int:
        outcomes = await asyncio.gather(
            *(self._tick(*tick) for tick in held), return_exceptions=True
        )
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures and len(failures) == len(outcomes):
            raise failures[0]
        return sum(1 for o in outcomes if o is True)

    async def _tick(
        self, follower: Follower, segment: JetStreamSegment, last_seq: int, time_ms: int
    ) -> bool:
        try:
            seq = await self._engine.publish(
                segment.subject, b"", tick_headers(time_ms), expected_last_subject_seq=last_seq
            )
        except WrongLastSequence:
            return False  # written meantime (an append, or another server's tick)
        follower.log.apply_published(seq, segment.subject, TickMessage(time_ms))
        return True

    @property
    def parked_reads(self) -> int:
        """How many reads wait at a segment's tail on this server now."""
        return self._readers.waiting

    @property
    def accepting_writes(self) -> bool:
        """Whether the cluster takes writes now: connected, and its catalog has a leader.

        False without a quorum (no leader can be elected), while the
        connection is down, and once closed.
        """
        return not self._closed.is_set() and self._monitor.reachable

    def background_status(self) -> list[TaskStatus]:
        """The cluster probe, the catch-up of followed streams, and idle ticks if on."""
        tasks = [self._probe, self._catch_up, self._idle_ticks, self._writer_timeouts]
        return [task.status() for task in tasks if task is not None]

    def journal_size(self) -> None:
        """None: the cluster keeps the data."""
        return None

    def location(self) -> str:
        """The cluster's URLs (passwords left out) and the namespace."""
        config = self.config
        return f"JetStream {config.redacted_servers()} (namespace {config.namespace!r})"

    def replication(self) -> list[ReplicaState]:
        """How each replicated log of the store stands: its leader and its replicas' lag."""
        return self._run(self._monitor.replication(self._logs()))

    def leader_changes(self) -> dict[str, int]:
        """How many leader elections of each log this server heard of since it started."""
        return self._monitor.leader_changes(self._logs())

    def _logs(self) -> dict[str, str]:
        return {f.stream_name: f.log.name for f in self._followers.all()}

    # --- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Stops the background tasks and followers, and disconnects; closing twice is harmless."""
        if self._closed.is_set():
            return
        for task in (self._idle_ticks, self._writer_timeouts):
            if task is not None:
                task.stop()
        self._closed.set()
        for task in self._tasks:
            task.cancel()
        try:
            self._engine.run(self._followers.stop(), timeout_s=10)
        except Exception as error:  # closing goes on
            _log.debug("stopping the followers: %s", error)
        self._engine.close()

    def __enter__(self) -> JetStreamStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JetStreamStore({self.location()})"


def _segment_messages(
    entry: StreamEntry[JetStreamSegment], record: Record
) -> list[tuple[int, dict[str, str]]]:
    """The segment messages that go before ``record`` in its batch: (segment number, headers)."""
    if isinstance(record, StreamScaled | StreamSealed):
        return [
            (s.number, entry.segments[s.number].seal_marker_headers(s.time_ms))
            for s in record.sealed
        ]
    if isinstance(record, WatermarkAsserted | WritersTimedOut):
        fenced = {stamp.number for stamp in record.segments}
        if isinstance(record, WatermarkAsserted):
            fenced.update(number for number, _ in record.fences)
        return [(number, fence_headers()) for number in sorted(fenced)]
    return []


def _expecting(last_seq: int) -> dict[str, str]:
    return {"Nats-Expected-Last-Subject-Sequence": str(last_seq)}
