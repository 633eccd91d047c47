"""The JetStream store: Tidemark's streams on a replicated NATS JetStream cluster.

:class:`JetStreamStore` is the store's front (:class:`~connector.store.front.StoreFront`)
over a :class:`JetStreamEngine`. Each Tidemark stream is one JetStream stream
(:mod:`.naming`); its state is the fold of its messages (:mod:`.log`),
rebuilt from the cluster by every server that serves it (:mod:`.follower`),
so any server answers any client and none holds anything the others lack.
The catalog and reader-group state are key-value buckets (:mod:`.catalog`,
:mod:`.state`).

Writes are compare-and-sets on the log: an append, an idle tick or a seal
marker is published expecting the last message this server saw of its
segment (JetStream's expected last subject sequence), and a record of the
stream (creation, scale, seal, truncation, assertion) expecting the last
record (:mod:`.changes`). A publish that loses (another server wrote first)
brings the view up to date and the front's decision is made again, so:

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
batch of messages, all or none. A writer's assertions riding on an append
are published before its events (a writer joining) and after them: atomic
publishes, in order (see :meth:`JetStreamEngine.append`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from connector.background import BackgroundTask, TaskStatus
from connector.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    StoreUnavailableError,
)
from connector.framing import HEADER, MAX_ROUTING_KEY_BYTES
from connector.model import ReplicaState, StreamDescription
from connector.names import SegmentId, validate_name
from connector.revisions import left_by, unknown_outcome, untouched
from connector.store.changes import StreamChanges
from connector.store.config import StoreObserver
from connector.store.engine import AppendOutcome, Creation, Decide, PlanBatch, Riding, Stored
from connector.store.front import StoreFront
from connector.store.jetstream.cache import PayloadCache
from connector.store.jetstream.catalog import CatalogBucket
from connector.store.jetstream.config import JetStreamConfig
from connector.store.jetstream.engine import Backoff, Engine, EngineUnavailable, WrongLastSequence
from connector.store.jetstream.follower import Follower
from connector.store.jetstream.followers import Followers
from connector.store.jetstream.messages import meta_headers
from connector.store.jetstream.monitor import ClusterMonitor
from connector.store.jetstream.naming import meta_subject, stream_config, stream_name
from connector.store.jetstream.publisher import HEADER_ROOM, Publisher
from connector.store.jetstream.segment import JetStreamSegment
from connector.store.jetstream.state import StateBucket
from connector.store.published import PublishedSegment
from connector.store.records import Record, StreamCreated, StreamTruncated
from connector.store.streams import StreamEntry

__all__ = ["JetStreamEngine", "JetStreamStore"]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: How much longer than a call a server's start waits for the cluster (a meta leader's election).
OPEN_GRACE_S = 20.0
#: How often the cluster's health is probed (ms).
PROBE_PERIOD_MS = 500
#: How often every followed stream is checked against its last sequence (ms).
CATCH_UP_PERIOD_MS = 1_000


class JetStreamEngine:
    """The JetStream store's engine: streams of segments on a cluster; see the module docstring.

    Opening connects to the cluster, makes the store's buckets if need be
    and rebuilds every stream of the namespace from its messages; it fails
    with :class:`~connector.errors.StoreUnavailableError` when the cluster
    cannot be reached, and with :class:`~connector.errors.InvalidArgumentError`
    when its messages are too small for ``max_event_size``. A change returns
    once a quorum of the stream's replicas stored it.
    """

    def __init__(self, config: JetStreamConfig):
        self.config = config
        self._clock = config.clock
        self.observer = StoreObserver()
        self._cache = PayloadCache(config.read_cache_bytes)
        self._closed = threading.Event()
        self._tasks: list[Future[None]] = []
        self._nats = Engine(config, on_connection=self._connection_changed)
        self._catalog = CatalogBucket(self._nats, config.namespace)
        self._states = StateBucket(self._nats, config.namespace)
        self._monitor = ClusterMonitor(self._nats, config.namespace)
        self._followers = Followers(
            self._nats, self._cache, self._catalog, config.namespace, config.unavailable_retry_s
        )
        self._publisher = Publisher(
            self._nats,
            self._followers,
            self._cache,
            config,
            run=self._run,
            gone=self._gone,
            committed=lambda changes: self.observer.committed(changes),
        )
        try:
            self._nats.connect()
            self._check_payload_room()
            self._nats.run(self._open())
        except BaseException:
            self._nats.close()
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
            self._tasks.append(self._nats.spawn(task.run_periodically()))

    # --- opening ------------------------------------------------------------------------

    def _check_payload_room(self) -> None:
        room = self._nats.max_payload - HEADER_ROOM
        largest = HEADER.size + 2 + MAX_ROUTING_KEY_BYTES + self.config.max_event_size
        if largest > room:
            msg = (
                f"max_event_size {self.config.max_event_size} does not fit the cluster's messages: "
                f"its max_payload is {self._nats.max_payload} bytes and an event takes up to "
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

    # --- running on the loop ---------------------------------------------------------------

    def _run(self, work: Coroutine[Any, Any, _T]) -> _T:
        if self._closed.is_set():
            work.close()
            msg = "the store is closed"
            raise StoreUnavailableError(msg)
        return self._nats.run(work)

    def _retrying(self, attempt: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        """``attempt()`` on the loop, tried again with backoff while the cluster is unavailable."""

        async def tries() -> _T:
            backoff = Backoff(self.config.unavailable_retry_s)
            while True:
                try:
                    return await backoff.within(attempt(), "a call to the cluster")
                except EngineUnavailable as error:
                    await backoff.after(error)

        return self._run(tries())

    # --- looking up ---------------------------------------------------------------------------

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
            self._publisher.sync(follower)  # created a moment ago through another server?
        return follower, follower.log.segment_named(name)

    def _gone(self, follower: Follower) -> NotFoundError | StoreUnavailableError:
        """What a stream JetStream says is missing is: deleted (NOT_FOUND), or not reachable."""
        ref = self._retrying(lambda: self._catalog.stream(*follower.log.entry_names))
        if ref is None or ref.uid != follower.uid:
            self._run(self._followers.unfollow(follower.log.entry_names))
            return NotFoundError(f"stream {follower.log.name} does not exist")
        return StoreUnavailableError(
            f"the JetStream stream of {follower.log.name} cannot be reached"
        )

    def stream(self, scope: str, stream: str) -> StreamEntry[JetStreamSegment]:
        """The stream as this server's view holds it now."""
        return self._follower(scope, stream).log.snapshot()

    def changes(self, scope: str, stream: str) -> StreamChanges[PublishedSegment]:
        """The record of the stream's changes as this server applied them (pushed or pulled)."""
        return self._follower(scope, stream).log.entry.changes

    def describe(self, scope: str, stream: str) -> StreamDescription:
        """The stream as the cluster has it: this server's view is brought up to date first."""
        follower = self._follower(scope, stream)
        self._publisher.sync(follower)
        with follower.log.locked():
            return follower.log.entry.describe()

    def segment(
        self, name: str, offset: int = 0, known_watermark: int | None = None
    ) -> JetStreamSegment:
        """The segment, its view brought up to date when the caller has seen beyond it.

        That is when ``offset`` lies past its end, or the watermark the
        caller knows at the tail is above this server's (it read through
        another server, which saw a later tick): a client moving between
        servers never reads a segment going back. A segment this server
        does not know yet is looked for in the cluster.
        """
        follower, target = self._segment(name)
        snapshot = target.snapshot()
        if offset > snapshot.committed_end or (
            known_watermark is not None
            and offset == snapshot.committed_end
            and known_watermark > snapshot.watermark
        ):
            self._publisher.sync(follower)
        return target

    def latest_segment(self, name: str) -> JetStreamSegment:
        """The segment with everything written before this call, through any server."""
        follower, target = self._segment(name)
        self._publisher.sync(follower)
        return target

    def segment_count(self) -> int:
        """How many segments the followed streams have."""
        return self._followers.segment_count()

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream this server follows, sorted (every stream of the catalog, once watched)."""
        return self._followers.names()

    def scopes(self) -> list[str]:
        """Every scope of the catalog, sorted."""
        return self._retrying(self._catalog.scopes)

    def stream_names(self, scope: str) -> list[str] | None:
        """The streams the catalog names in ``scope``; None when there is no such scope."""
        if not self._retrying(lambda: self._catalog.has_scope(scope)):
            return None
        return self._retrying(lambda: self._catalog.stream_names(scope))

    # --- changing -------------------------------------------------------------------------

    def create_scope(self, scope: str) -> bool:
        """Creates the scope's catalog key (a compare-and-set: of two servers one does)."""
        token = uuid.uuid4().hex
        return self._retrying(lambda: self._catalog.create_scope(scope, token))

    def create_stream(
        self, scope: str, stream: str, decide: Callable[[], StreamCreated]
    ) -> Creation:
        """Makes the stream's JetStream stream with its creation record, then names it.

        The stream exists once the catalog names it (a compare-and-set, so
        of two servers creating it one does); a scope deleted meanwhile
        takes the stream back.
        """
        if not self._retrying(lambda: self._catalog.has_scope(scope)):
            return Creation.NO_SCOPE
        if self._retrying(lambda: self._catalog.stream(scope, stream)) is not None:
            return Creation.TAKEN
        record = decide()
        uid = uuid.uuid4().hex[:20]
        config = stream_config(self.config.namespace, uid, self.config.replicas)
        self._retrying(lambda: self._nats.create_stream(config))
        self._retrying(lambda: self._publish_creation(uid, record))
        ref = self._retrying(lambda: self._catalog.create_stream(scope, stream, uid))
        orphan = stream_name(self.config.namespace, uid)
        if ref is None:
            self._retrying(lambda: self._nats.delete_stream(orphan))
            return Creation.TAKEN
        if not self._retrying(lambda: self._catalog.has_scope(scope)):  # deleted meanwhile
            self._retrying(lambda: self._catalog.delete_stream(ref))
            self._retrying(lambda: self._nats.delete_stream(orphan))
            return Creation.NO_SCOPE
        self._run(self._followers.follow(ref))
        return Creation.CREATED

    async def _publish_creation(self, uid: str, record: Record) -> None:
        subject = meta_subject(self.config.namespace, uid)
        try:
            await self._nats.publish(subject, b"", meta_headers(record), 0)
        except WrongLastSequence:
            return  # stored by an earlier try whose answer was lost

    def change(
        self,
        scope: str,
        stream: str,
        decide: Decide[JetStreamSegment],
        *,
        grouped: bool = False,
    ) -> Record | None:
        """Publishes the record ``decide`` makes (see :mod:`.publisher`); every change alike."""
        return self._publisher.change(self._follower(scope, stream), decide)[1]

    def change_every_stream(
        self,
        decide: Decide[JetStreamSegment],
        among: Callable[[StreamEntry[JetStreamSegment]], bool] | None = None,
    ) -> list[Record]:
        """Publishes the record ``decide`` makes of each followed stream ``among`` picks."""
        picked = (f for f in self._followers.all() if among is None or f.log.picked(among))
        changes = (self._publisher.change(f, decide)[1] for f in picked)
        return [record for record in changes if record is not None]

    def truncate(
        self,
        scope: str,
        stream: str,
        decide: Callable[[StreamEntry[JetStreamSegment]], StreamTruncated],
    ) -> tuple[StreamTruncated, int]:
        """Publishes the truncation, then purges removed segments' messages but their seal markers.

        A segment whose purge fails keeps its bytes for now; its data is
        unreadable already.
        """
        follower = self._follower(scope, stream)
        self._publisher.sync(follower)
        _, record = self._publisher.change(follower, decide)
        assert isinstance(record, StreamTruncated)
        freed = 0
        for number in record.removed:
            segment = follower.log.segment(number)
            try:
                self._retrying(
                    lambda s=segment: self._nats.purge_subject(follower.stream_name, s.subject, 1)
                )
            except StoreUnavailableError as error:
                _log.warning("%s: its messages stay for now: %s", segment.name, error)
                continue
            freed += segment.committed_end
        return record, freed

    def delete_stream(
        self, scope: str, stream: str, check: Callable[[StreamEntry[JetStreamSegment]], object]
    ) -> None:
        """Deletes the stream's name from the catalog, then its JetStream stream.

        Once this returns, every call naming the stream through this server
        fails with NOT_FOUND, and through the others as soon as their catalog
        watch sees the deletion (milliseconds).
        """
        follower = self._follower(scope, stream)
        self._publisher.sync(follower)
        check(follower.log.entry)
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
            self._retrying(lambda: self._nats.delete_stream(follower.stream_name))
        except StoreUnavailableError as error:  # deleted from the catalog: only garbage stays
            _log.warning("the JetStream stream %s stays for now: %s", follower.stream_name, error)
        self._run(self._followers.unfollow((scope, stream)))

    def delete_scope(
        self, scope: str, check: Callable[[Sequence[str], Sequence[str]], object]
    ) -> bool:
        """Deletes the scope's key, then looks at the scope again.

        A stream or a value made meanwhile (through another server) brings
        the scope back and the deletion fails, as creating a stream checks
        its scope again once made.
        """
        revision = self._retrying(lambda: self._catalog.scope_revision(scope))
        if revision is None:
            return False
        self._check_held(scope, check)
        if not self._retrying(lambda: self._catalog.delete_scope(scope, revision)):
            if self._retrying(lambda: self._catalog.has_scope(scope)):
                self._check_held(scope, check)
                msg = f"scope {scope!r} changed while it was being deleted: try again"
                raise FailedPreconditionError(msg)
            return True  # deleted by an earlier try whose answer was lost
        try:
            self._check_held(scope, check)
        except FailedPreconditionError:
            self._retrying(lambda: self._catalog.create_scope(scope, uuid.uuid4().hex))
            raise
        return True

    def _check_held(
        self, scope: str, check: Callable[[Sequence[str], Sequence[str]], object]
    ) -> None:
        streams = self._retrying(lambda: self._catalog.stream_names(scope))
        check(streams, self._retrying(lambda: self._states.keys("")))

    # --- data -----------------------------------------------------------------------------

    def append(
        self,
        target: JetStreamSegment,
        plan: PlanBatch[JetStreamSegment],
        riding: Riding[JetStreamSegment] | None = None,
    ) -> AppendOutcome:
        """Publishes the change riding before the batch, the batch, then the one after, in order.

        Each is an atomic publish. The riding changes are checked against
        this server's view first, so one refused (a fall, a sealed stream)
        stores nothing, and the batch too before a change goes ahead of it,
        so an append refused for its own reasons (a gap, a sealed segment)
        publishes no change. The call returns once all are durable. A
        failure between them leaves what was published stored without the
        rest, and the call fails; its retry finds that stored (duplicates)
        and stores the rest, so nothing is stored twice and the order holds.
        Only a change another server makes between the check and a later
        publish (a seal, or the same writer id asserting there) can refuse
        what follows after something was stored; the call then fails with
        that refusal, and a retry finds what was stored.
        """
        parsed = SegmentId.parse(target.name)
        follower = self._follower(parsed.scope, parsed.stream)
        if riding is None:
            return AppendOutcome(self._publisher.append(follower, target, plan))
        with follower.log.locked():
            riding.check(follower.log.snapshot())
        before = None
        if riding.before is not None:
            self._publisher.check_batch(follower, target, plan)
            before = self.change(riding.scope, riding.stream, riding.before)
        result = self._publisher.append(follower, target, plan)
        after = None
        if riding.after is not None:
            after = self.change(riding.scope, riding.stream, riding.after)
        return AppendOutcome(result, before, after)

    def tick(self, now_ms: int, due: Callable[[JetStreamSegment], bool]) -> int:
        """Publishes a tick on each due segment (see :meth:`.publisher.Publisher.tick`)."""
        return self._publisher.tick(now_ms, due)

    # --- small durable values ------------------------------------------------------------

    def state_keys(self, prefix: str) -> list[str]:
        """The state bucket's keys starting with ``prefix``, sorted."""
        return self._retrying(lambda: self._states.keys(prefix))

    def get_state(self, key: str) -> Stored:
        """The value stored under ``key``, asked of the bucket's leader."""
        stored = self._retrying(lambda: self._states.get(key))
        return Stored(stored.value, stored.revision)

    def state_at_once(self, key: str) -> None:
        """None: a value is asked of the bucket's leader, over the network."""
        return None

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, Stored]:
        """A compare-and-set on the bucket.

        A try whose answer the cluster lost and that finds the value and the
        revision it would have left counts as written; one that finds the
        value moved on since cannot tell, and the call is UNAVAILABLE (see
        :mod:`connector.revisions`).
        """
        backoff = Backoff(self.config.unavailable_retry_s)
        unknown = False
        while True:
            try:
                setting = self._states.compare_and_set(key, expected_revision, value)
                written = self._run(backoff.within(setting, f"a compare-and-set of {key!r}"))
                break
            except EngineUnavailable as error:
                unknown = True
                self._run(backoff.after(error))
        current = self.get_state(key)
        if not written and unknown:
            written = left_by(current.revision, current.value, expected_revision, value)
            if not written and not untouched(current.revision, expected_revision):
                msg = unknown_outcome("a compare-and-set", key, expected_revision, current.revision)
                raise EngineUnavailable(msg)
        return written, current

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, Stored]:
        """A deletion on the bucket; a try whose answer was lost may have deleted it.

        It did when the value is gone with the revision it expected; when a
        value was stored again since, the call is UNAVAILABLE (unknown).
        """
        backoff = Backoff(self.config.unavailable_retry_s)
        unknown = False
        while True:
            try:
                deleting = self._states.delete(key, expected_revision)
                deleted = self._run(backoff.within(deleting, f"a deletion of {key!r}"))
                break
            except EngineUnavailable as error:
                unknown = True
                self._run(backoff.after(error))
        current = self.get_state(key)
        if not deleted and unknown:
            stored = self._retrying(lambda: self._states.get(key))
            deleted = stored.revision == 0 and stored.last_revision == expected_revision
            if not deleted and not untouched(stored.revision, expected_revision):
                msg = unknown_outcome("a deletion", key, expected_revision, stored.revision)
                raise EngineUnavailable(msg)
        return deleted, current

    # --- operations -----------------------------------------------------------------------

    @property
    def accepting_writes(self) -> bool:
        """Whether the cluster takes writes now: connected, and its catalog has a leader.

        False without a quorum (no leader can be elected), while the
        connection is down, and once closed.
        """
        return not self._closed.is_set() and self._monitor.reachable

    def background_status(self) -> list[TaskStatus]:
        """The cluster probe and the catch-up of followed streams."""
        return [self._probe.status(), self._catch_up.status()]

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

    def close(self) -> None:
        """Stops the background tasks and followers, and disconnects; closing twice is harmless."""
        if self._closed.is_set():
            return
        self._closed.set()
        for task in self._tasks:
            task.cancel()
        try:
            self._nats.run(self._followers.stop(), timeout_s=10)
        except Exception as error:  # closing goes on
            _log.debug("stopping the followers: %s", error)
        self._nats.close()

    def __repr__(self) -> str:
        return f"JetStreamEngine({self.location()})"


class JetStreamStore(StoreFront[JetStreamSegment]):
    """The JetStream store: the store's front over a :class:`JetStreamEngine` on a cluster."""

    def __init__(self, config: JetStreamConfig):
        super().__init__(JetStreamEngine(config))
