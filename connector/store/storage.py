"""The storage seam: what the gRPC server needs of a store, and how one is opened.

:class:`Storage` is the store's API as the server, its health service and
its metrics use it. Two storages implement it: the file store
(:class:`~connector.store.file.store.SegmentStore`, a data dir on one machine, the
embedded default) and the JetStream store (``connector.store.jetstream``,
streams on a replicated NATS JetStream cluster). Both keep the same
promises, stated on each method here; what a storage adds (where its data
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
    TruncationResult,
)
from connector.store.config import StorageConfig, StoreConfig, StoreObserver

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
        """Creates a scope; AlreadyExistsError when it exists."""
        ...

    def create_stream(self, scope: str, stream: str, segment_count: int = 1) -> StreamDescription:
        """Creates a stream whose ``segment_count`` segments split [0, 1) evenly."""
        ...

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """Every segment of the stream, with ranges, epochs and lineage."""
        ...

    def scale_stream(
        self, scope: str, stream: str, sealed_segments: Sequence[int], split_count: int = 0
    ) -> StreamDescription:
        """Splits one segment into ``split_count`` or merges adjacent ones (``split_count`` 0)."""
        ...

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals every open segment of the stream; readers see each one end."""
        ...

    def delete_stream(self, scope: str, stream: str) -> None:
        """Deletes a sealed stream; then every call naming it fails with NOT_FOUND."""
        ...

    def delete_scope(self, scope: str) -> None:
        """Deletes an empty scope; FailedPreconditionError naming its streams or state values."""
        ...

    def truncate_stream(self, scope: str, stream: str, cut: Mapping[int, int]) -> TruncationResult:
        """Truncates the stream at ``cut`` (segment number -> offset): data before it goes."""
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
    ) -> AppendResult:
        """Appends ``events`` and returns once they are durable.

        Events this writer already stored in this segment (numbers below the
        next expected one) are skipped and counted as duplicates, so a retried
        batch is never stored twice. ``discarded_from`` announces a gap of
        discarded numbers; ``assertion`` rides on the append (applied after its
        events, as :meth:`assert_watermark`; decided before anything is stored,
        so a refused one refuses the append whole; durable with the events when
        the call returns).
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
        """Records a writer's assertion (``event_time``; None: idle) on every open segment.

        Returns once durable. Decided and applied by the rules of
        :mod:`connector.store.assertions` (a duplicate number changes
        nothing; an event time below the writer's previous one is refused).
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
        """Reads whole events from ``offset``, at least one if any is there."""
        ...

    def watch_tail(
        self,
        segment: str,
        offset: int,
        known_watermark: int | None,
        wake: Callable[[], None],
    ) -> Callable[[], None] | None:
        """Arranges for ``wake()`` once a read waiting at ``offset`` would return; holds no thread.

        Returns the function that withdraws the watch, or None when there is
        nothing to wait for (read again at once).
        """
        ...

    def plan_read(
        self,
        segment: str,
        offset: int,
        max_events: int | None = None,
        max_bytes: int | None = None,
        before_time: int | None = None,
    ) -> PlannedRead:
        """Where a read from ``offset`` under a budget would stop, without the data.

        With ``before_time``, it stops before the first event ingested at or
        after that time (epoch ms): from a segment's first readable offset,
        where a read by time starts (see :mod:`connector.store.read_plan`).
        """
        ...

    def segment_info(self, segment: str) -> SegmentInfo:
        """The segment's creation time, write offset, LAST_WRITE_TIME, seal and watermark."""
        ...

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream's (scope, stream), sorted."""
        ...

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        ...

    def list_streams(self, scope: str) -> list[str]:
        """The streams of ``scope``, sorted, sealed ones too."""
        ...

    # --- small durable values (reader group state) --------------------------------

    def state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted."""
        ...

    def get_state(self, key: str) -> StateValue:
        """The value stored under ``key``; revision 0 when there is none."""
        ...

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, StateValue]:
        """Stores ``value`` if the revision is still ``expected_revision``; durable on return."""
        ...

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, StateValue]:
        """Deletes the value if its revision is still ``expected_revision``; durable on return.

        A value stored again under ``key`` takes a revision above every one
        the deleted value had.
        """
        ...

    # --- idle segments and operations ---------------------------------------------

    def advance_idle_segments(self) -> int:
        """Gives every open segment idle past ``max_watermark_lag_ms`` an idle tick."""
        ...

    def mark_silent_writers_idle(self) -> int:
        """Marks idle every writer silent for over ``writer_idle_timeout_ms``; returns how many."""
        ...

    @property
    def parked_reads(self) -> int:
        """How many reads wait at a segment's tail now."""
        ...

    @property
    def accepting_writes(self) -> bool:
        """Whether the store takes changes now (health: SERVING or NOT_SERVING)."""
        ...

    def background_status(self) -> list[TaskStatus]:
        """How the store's background tasks are doing (see :mod:`connector.background`)."""
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
