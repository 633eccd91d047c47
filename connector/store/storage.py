"""The storage seam: what the gRPC server needs of a store, and how one is opened.

:class:`Storage` is the store's API as the server, its health service and
its metrics use it, and the one place its promises are stated. It is
implemented once, by the store's front (:class:`~connector.store.front.StoreFront`),
over one of two engines (:mod:`connector.store.engine`): the file store
(:class:`~connector.store.file.store.SegmentStore`, a data dir on one machine,
the embedded default) and the JetStream store
(:class:`~connector.store.jetstream.store.JetStreamStore`, streams on a
replicated NATS JetStream cluster). What an engine adds (where its data
lives, what an acknowledgement means there) is documented on it.
:func:`open_storage` opens the one a configuration names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from connector.background import TaskStatus
from connector.errors import InvalidArgumentError
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
from connector.store.changes import Listener
from connector.store.config import StorageConfig, StoreConfig, StoreObserver
from connector.store.reading import FollowedSegment

__all__ = ["Storage", "open_storage"]


class Storage(Protocol):
    """A store of streams of segments, with ingestion time and watermarks (PDP 26); thread-safe.

    Every mutating call blocks until its change is durable (in the storage's
    sense) and visible, then returns. Reads never block writers; a read at
    the tail blocks at most the ``wait_ms`` it asks for. Domain errors are
    :mod:`connector.errors` classes; a storage that cannot be reached raises
    :class:`~connector.errors.StoreUnavailableError`, never NotFoundError.
    """

    #: Told of durable groups and idle ticks (metrics); the server sets it.
    observer: StoreObserver

    @property
    def config(self) -> StorageConfig:
        """The store's settings."""
        ...

    # --- metadata ---------------------------------------------------------------

    def create_scope(self, scope: str) -> None:
        """Creates a scope.

        Raises:
            AlreadyExistsError: the scope exists.
            InvalidArgumentError: ``scope`` is not a valid name.
        """
        ...

    def create_stream(self, scope: str, stream: str, segment_count: int = 1) -> StreamDescription:
        """Creates a stream whose ``segment_count`` segments split [0, 1) evenly.

        Raises:
            NotFoundError: the scope does not exist.
            AlreadyExistsError: the stream exists.
            InvalidArgumentError: a bad name, or ``segment_count`` below 1.
            ResourceExhaustedError: ``segment_count`` is over
                ``max_segments_per_stream`` (cause ``stream_segment_limit``),
                or the store would hold more than ``max_segments`` segments
                (cause ``segment_limit``).
        """
        ...

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """Every segment of the stream, with ranges, epochs and lineage."""
        ...

    def scale_stream(
        self, scope: str, stream: str, sealed_segments: Sequence[int], split_count: int = 0
    ) -> StreamDescription:
        """Splits one segment into ``split_count`` or merges adjacent ones (``split_count`` 0).

        The sealed segments' successors start with the watermark their
        creation time gives, which is never below a predecessor's last one.

        Raises:
            NotFoundError: the stream or a segment does not exist.
            SegmentSealedError: a segment is sealed already.
            InvalidArgumentError: the split or merge is malformed.
            ResourceExhaustedError: the stream would have more open segments
                than ``max_segments_per_stream``, or the successors do not fit
                ``max_segments``.
        """
        ...

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals every open segment of the stream; readers see each one end.

        Raises:
            NotFoundError: the stream does not exist.
            FailedPreconditionError: the stream is sealed already.
        """
        ...

    def delete_stream(self, scope: str, stream: str) -> None:
        """Deletes a sealed stream: its segments, their data and lineage.

        Once this returns, every call naming the stream or one of its
        segments fails with NOT_FOUND, and the name may be used for a new
        stream.

        Raises:
            NotFoundError: the stream does not exist.
            FailedPreconditionError: the stream is not sealed (seal it first).
        """
        ...

    def delete_scope(self, scope: str) -> None:
        """Deletes an empty scope: no streams, sealed or not, and no state values (reader groups).

        Raises:
            NotFoundError: the scope does not exist.
            FailedPreconditionError: the scope still has streams or state
                values; the error names them.
        """
        ...

    def truncate_stream(self, scope: str, stream: str, cut: Mapping[int, int]) -> TruncationResult:
        """Truncates the stream at ``cut`` (segment number -> offset): data before it goes.

        Each cut segment's data before its offset (an event boundary) becomes
        unreadable; every sealed segment wholly before the cut (all of whose
        successors are in the cut or wholly before it) loses all its data. A
        read below a segment's first readable offset fails with
        TruncatedError. Truncating at or before an earlier cut changes
        nothing. Lineage stays: a reader at a removed segment's end still
        finds its successors.

        Raises:
            NotFoundError: the stream or a cut segment does not exist.
            InvalidArgumentError: the cut is empty, or an offset is past its
                segment's end or not at an event boundary.
        """
        ...

    # --- data -------------------------------------------------------------------

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
        """Appends ``events`` and returns once they are durable.

        Events this writer already stored in this segment (numbers below the
        next expected one) are skipped and counted as duplicates, so a retried
        batch is never stored twice; a retry of a batch stored before the
        segment was sealed is answered as stored.

        ``discarded_from`` announces that the writer discarded the numbers from
        there up to ``first_event_number`` without learning whether they were
        stored: the gap is accepted when every number below ``discarded_from``
        is stored, and once this append is, a late copy of a discarded batch is
        a duplicate and is never stored.

        ``assertion`` rides on the append: decided before anything is stored
        (refused, nothing of the call is stored), applied after its events, as
        :meth:`assert_watermark` applies one, and durable with them when the
        call returns. ``joining`` rides the same way but is applied before the
        events: the writer joins the set holding the event-time watermark (or
        moves in it) before they are stored, so at their positions it holds
        the watermark at ``joining``'s time at most. It asserts a time (never
        an idle mark), and with ``assertion`` is numbered before it and not
        above it. Both are numbered in the writer's sequence: a retry of the
        call finds them stored (duplicates) and joins nothing twice.

        Raises:
            NotFoundError: there is no such segment.
            SegmentSealedError: the segment is sealed (its successors are named).
            FailedPreconditionError: ``first_event_number`` leaves a gap not
                announced by ``discarded_from``; the riding assertions' stream
                is sealed.
            InvalidArgumentError: a malformed argument; a riding assertion is
                below the writer's previous one (both named); ``joining`` is
                an idle mark, or not before ``assertion``.
            ResourceExhaustedError: too many events, or one over ``max_event_size``.
        """
        ...

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
        Decided by the rules of :mod:`connector.store.assertions`.

        Raises:
            NotFoundError: no such stream, or a fence's segment.
            FailedPreconditionError: the stream is sealed; a fence leaves a gap.
            InvalidArgumentError: ``event_time`` is below the writer's previous
                assertion (both named), or a malformed argument.
        """
        ...

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
        answer still carries the watermark. A reader that saw ``offset`` (or
        ``known_watermark``) through another server of the same store never
        finds the segment behind it.

        Raises:
            NotFoundError: there is no such segment.
            TruncatedError: the stream was truncated past ``offset`` (the
                error names the first readable offset).
            InvalidArgumentError: ``offset`` is negative, past the end or not
                at an event boundary; ``max_bytes`` is not positive.
            ResourceExhaustedError: no file descriptor was left to read with.
            StoreUnavailableError: the data could not be read.
        """
        ...

    def watch_tail(
        self,
        segment: str,
        offset: int,
        known_watermark: int | None,
        wake: Callable[[], None],
    ) -> Callable[[], None] | None:
        """Arranges for ``wake()`` once a read waiting at ``offset`` would return; holds no thread.

        The thread-free twin of :meth:`read`'s wait, for servers that wait on
        an event loop: ``wake`` is called once, from the thread that publishes
        data past ``offset``, a seal or a watermark above ``known_watermark``
        (by default the one at ``offset``), a truncation, or the store's
        closing. It must be quick and must not call the store (scheduling a
        callback on an event loop is). Returns the function that withdraws
        the watch, to call whether or not it fired; None when there is
        nothing to wait for (read again at once).

        Raises:
            NotFoundError: there is no such segment.
        """
        ...

    def follow(
        self, segment: str, offset: int, known_watermark: int | None, listener: Listener
    ) -> FollowedSegment:
        """Reads of one segment that tell ``listener`` of its every change; holds no thread.

        For many segments waited on at once (a fetch session): ``listener``
        is called after every change of the segment (data, an idle tick, a
        change of event time, a seal, a truncation) and once it goes away
        or the store closes, on the thread that applies the change: it must
        be quick and must not call the store. The result's ``read`` reads
        without waiting, from that very segment (NotFoundError once it went
        away), as :meth:`read` does; its ``close`` stops the listener.
        ``offset`` and ``known_watermark`` say what the caller has seen (as
        for :meth:`read`: a segment behind them is brought up to date first).

        Raises:
            NotFoundError: there is no such segment.
        """
        ...

    def describe_tails(
        self, scope: str, stream: str, incarnation: int = 0, version: int = 0
    ) -> StreamTails:
        """The tails of the stream's segments changed after ``version``, from memory.

        Every segment's end, first readable offset, watermarks, seal and
        lineage (:class:`~connector.model.SegmentTail`). ``incarnation`` and
        ``version`` are a previous answer's: with this store's incarnation
        of the stream the answer holds only the segments changed after
        ``version``, in the order of their last change (O(what changed));
        with another (0: none known) it is complete. Every change applied
        before the call is counted; on a replicated store, every change this
        server applied (another server's reach it within milliseconds).

        Raises:
            NotFoundError: the stream does not exist.
            InvalidArgumentError: a bad name.
        """
        ...

    def listen_stream(self, scope: str, stream: str, listener: Listener) -> Callable[[], None]:
        """Tells ``listener`` of every change of the stream's segments; returns what stops it.

        Also told once the stream goes away or the store closes. As for
        :meth:`follow`, ``listener`` must be quick and must not call the store.

        Raises:
            NotFoundError: the stream does not exist.
        """
        ...

    def plan_read(
        self,
        segment: str,
        offset: int,
        max_events: int | None = None,
        max_bytes: int | None = None,
        before_time: int | None = None,
        work_buckets: int = 0,
    ) -> PlannedRead:
        """Where a read from ``offset`` under a budget would stop, without the data.

        At most ``max_events`` events in ``max_bytes`` bytes (None: no
        limit). With ``before_time``, it stops before the first event
        ingested at or after that time (epoch ms): from a segment's first
        readable offset, where a read by time starts (see
        :mod:`connector.store.read_plan`). With ``work_buckets`` > 0 the
        plan carries the segment's work from ``offset`` to its tail, in at
        most that many buckets each (:mod:`connector.store.unread_work`).

        Raises:
            TruncatedError: the stream was truncated past ``offset`` (the
                error names the first readable offset).
            InvalidArgumentError: ``offset`` is negative, past the end or not
                at an event boundary; a limit is given and not > 0;
                ``work_buckets`` is negative or above 256.
            StoreUnavailableError: the data could not be read.
        """
        ...

    def segment_info(self, segment: str) -> SegmentInfo:
        """The segment's creation time, write offset, LAST_WRITE_TIME, seal and watermarks.

        Everything written before this call, through any server of the
        store, is counted.
        """
        ...

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream's (scope, stream), sorted."""
        ...

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        ...

    def list_streams(self, scope: str) -> list[str]:
        """The streams of ``scope``, sorted, sealed ones too.

        Raises:
            NotFoundError: there is no such scope.
            InvalidArgumentError: ``scope`` is not a valid name.
        """
        ...

    # --- small durable values (reader group state) --------------------------------

    def state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted.

        Raises:
            InvalidArgumentError: ``prefix`` is longer than a key may be.
        """
        ...

    def get_state(self, key: str, known_revision: int | None = None) -> StateValue:
        """The value stored under ``key``; revision 0 when there is none.

        When its revision is ``known_revision`` the answer is ``unchanged``,
        without the value (the caller holds it).
        """
        ...

    def get_state_at_once(self, key: str, known_revision: int | None = None) -> StateValue | None:
        """:meth:`get_state`'s answer if the engine has it without waiting, else None.

        Never blocks (no I/O, no lock another thread holds), so the server
        answers a reader group's sync on its event loop; None (JetStream,
        or the file store's catalog busy) means: ask :meth:`get_state`.
        """
        ...

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, StateValue]:
        """Stores ``value`` if the revision is still ``expected_revision``; durable on return.

        Returns whether it was written and the value now stored.
        """
        ...

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, StateValue]:
        """Deletes the value if its revision is still ``expected_revision``; durable on return.

        Returns whether it was deleted and the value now stored (revision 0:
        none). A value stored under ``key`` afterwards (compare-and-set from
        revision 0) takes a revision above every one the deleted value had.
        """
        ...

    # --- idle segments and operations ---------------------------------------------

    def advance_idle_segments(self) -> int:
        """Gives every open segment idle past ``max_watermark_lag_ms`` an idle tick.

        The tick is a persisted temporal operation: it moves LAST_WRITE_TIME
        and the watermark at the segment's tail. Returns how many were ticked.

        Raises:
            ResourceExhaustedError: the ticks could not be stored (a full
                disk); none of them was, and the same segments are due again.
            StoreUnavailableError: the store is closed or failed.
        """
        ...

    def mark_silent_writers_idle(self) -> int:
        """Marks idle every writer silent for over ``writer_idle_timeout_ms``; returns how many.

        A writer that asserted event time and since neither appended to nor
        asserted on any open segment of the stream for that long (by the
        store's clock) no longer holds the event-time watermark back: a
        crashed writer holds it back for a bounded time, not forever. It
        joins again with its next assertion.
        """
        ...

    @property
    def parked_reads(self) -> int:
        """How many reads wait at a segment's tail now."""
        ...

    @property
    def accepting_writes(self) -> bool:
        """Whether the store takes changes now (health: SERVING or NOT_SERVING).

        False once closed or failed, and while its engine cannot store (a
        full disk, a cluster without quorum).
        """
        ...

    def background_status(self) -> list[TaskStatus]:
        """How the store's background tasks are doing (see :mod:`connector.background`).

        A task whose rounds fail goes on trying every period; its status says
        how many failed, when one last succeeded and whether it is stalled.
        """
        ...

    def journal_size(self) -> int | None:
        """The size of the store's journal on disk, in bytes; None where there is none."""
        ...

    def location(self) -> str:
        """Where the store keeps its data, for logs and messages."""
        ...

    def replication(self) -> list[ReplicaState]:
        """How each replicated log of the store stands (empty for a store of one node)."""
        ...

    def leader_changes(self) -> dict[str, int]:
        """How many leader elections of each log the store has seen since it started."""
        ...

    def close(self) -> None:
        """Stops the store's work and lets go of its resources; closing twice is harmless."""
        ...


def open_storage(config: StorageConfig) -> Storage:
    """The storage ``config`` describes, opened.

    The file store for a :class:`StoreConfig`, the JetStream store for a
    ``JetStreamConfig`` (it needs nats-py).

    Raises:
        InvalidArgumentError: the configuration names no storage this build has,
            or the storage cannot be opened with it.
    """
    if isinstance(config, StoreConfig):
        from connector.store.file.store import SegmentStore

        return SegmentStore(config)
    from connector.store.jetstream.config import JetStreamConfig

    if isinstance(config, JetStreamConfig):
        try:
            from connector.store.jetstream.store import JetStreamStore
        except ImportError as error:
            msg = (
                f"the JetStream store needs nats-py ({error}): "
                'pip install "tidemark-store[jetstream]"'
            )
            raise InvalidArgumentError(msg) from None
        return JetStreamStore(config)
    msg = f"no storage for a configuration of type {type(config).__name__!r}"
    raise InvalidArgumentError(msg)
