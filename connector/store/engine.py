"""What a storage engine does below the store's front: only what differs between storages.

:class:`~connector.store.front.StoreFront` implements the
:class:`~connector.store.storage.Storage` seam once: every name and argument
check, every decision and refusal, the append's prelude. Below it an
:class:`Engine` keeps the data and makes changes durable, each in its own
way: the file store (:mod:`connector.store.file`) in a data dir with a
journal and group commit, the JetStream store (:mod:`connector.store.jetstream`)
as compare-and-sets on a replicated log. Pravega's ``ChunkedSegmentStorage``
over ``ChunkStorage`` is the model: the segment semantics written once above
a narrow interface.

The front hands an engine its decisions as functions of a stream's (or a
segment's) *pending* state, the view of whoever prepares the next change
(:mod:`connector.store.published`): a :data:`Decide` makes a stream's record
(:mod:`connector.store.records`), a :data:`PlanBatch` an append's
:class:`Batch`. The engine runs a decision where it is atomic (the file
store on its sequencer's thread, the JetStream store against the last
message it saw, deciding again when another server wrote first) and makes
the result durable; a refusal the decision raises is the caller's error.

Every segment an engine holds is a :class:`~connector.store.published.PublishedSegment`:
each applied change (an append, an idle tick, an assertion's marks, a seal,
a truncation) reaches readers through it (its end, watermark index,
event-time index and seal, and its tail waits), whatever the engine. So
what follows change is written once, above the engines: a wait on many
segments subscribes where a segment publishes, and a stream's tail is
described from the snapshots of the segments :meth:`Engine.stream` holds.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar

from connector.background import TaskStatus
from connector.model import AppendResult, ReplicaState, StreamDescription
from connector.store.changes import StreamChanges
from connector.store.config import StorageConfig, StoreObserver
from connector.store.published import PublishedSegment
from connector.store.records import Record, StreamCreated, StreamTruncated
from connector.store.streams import StreamEntry

__all__ = [
    "AppendOutcome",
    "Batch",
    "Creation",
    "Decide",
    "Engine",
    "PlanBatch",
    "Riding",
    "Stored",
]

S = TypeVar("S", bound=PublishedSegment)

#: Decides a change of a stream from its pending state: the record to store, or
#: None when there is nothing to store. Raises the change's refusal.
Decide = Callable[[StreamEntry[S]], "Record | None"]


@dataclass(frozen=True)
class Batch:
    """An append as decided against its segment's pending state: what is left to store.

    ``duplicates`` events at the start of the batch were stored already (a
    retry); ``events`` are the rest, numbered from ``first_event_number``.
    No events: the whole batch was stored already, and the answer says so.
    """

    writer_id: str
    first_event_number: int
    events: Sequence[bytes]
    routing_keys: Sequence[str] | None
    duplicates: int

    @property
    def last_event_number(self) -> int:
        """The number of the batch's last event."""
        return self.first_event_number + len(self.events) - 1


#: Decides an append from its segment's pending state (refusing a gap or a seal).
PlanBatch = Callable[[S], Batch]


@dataclass(frozen=True)
class Riding(Generic[S]):
    """Changes of a stream that ride on an append: a writer's assertions around its events.

    ``check`` refuses them as deciding would and changes nothing: it runs
    before anything of the call is stored, so a refused one stores nothing
    of it. ``before`` is decided before the batch is staged, so its change
    precedes the events (a writer joining before them); ``after`` once the
    batch is staged, so its change follows them. Either may be None.
    """

    scope: str
    stream: str
    check: Callable[[StreamEntry[S]], object]
    before: Decide[S] | None = None
    after: Decide[S] | None = None


class AppendOutcome(NamedTuple):
    """What an append stored: the batch's result and the records of the changes riding on it.

    ``before`` and ``after`` are None where no change rode there, or where
    the one that rode was found stored already (a retry).
    """

    result: AppendResult
    before: Record | None = None
    after: Record | None = None


class Creation(enum.Enum):
    """What came of creating a stream."""

    CREATED = "created"
    NO_SCOPE = "no scope"
    TAKEN = "taken"


class Stored(NamedTuple):
    """A state value as an engine keeps it: the bytes and their revision (0: none)."""

    value: bytes
    revision: int


class Engine(Protocol[S]):
    """What a storage does below the front; thread-safe. See the module docstring.

    Lookups raise :class:`~connector.errors.NotFoundError` for a stream or
    segment the engine does not hold; an engine that cannot be reached
    raises :class:`~connector.errors.StoreUnavailableError`.
    """

    #: Told of durable groups and appends (metrics); the front's ``observer``.
    observer: StoreObserver

    @property
    def config(self) -> StorageConfig:
        """The engine's settings (what every storage shares, and its own)."""
        ...

    # --- looking up -------------------------------------------------------------

    def stream(self, scope: str, stream: str) -> StreamEntry[S]:
        """The stream as this engine holds it now, from memory."""
        ...

    def describe(self, scope: str, stream: str) -> StreamDescription:
        """The stream's segments, lineage and epochs, with every change made before the call."""
        ...

    def changes(self, scope: str, stream: str) -> StreamChanges[PublishedSegment]:
        """The record of the stream's changes as this engine applied them, from memory."""
        ...

    def segment(self, name: str, offset: int = 0, known_watermark: int | None = None) -> S:
        """The segment ``name``, its view reaching what a reader at ``offset`` has seen.

        A reader that saw ``offset`` or ``known_watermark`` at the tail (through
        another server) never finds the segment behind it.
        """
        ...

    def latest_segment(self, name: str) -> S:
        """The segment ``name`` with every change made before the call."""
        ...

    def segment_count(self) -> int:
        """How many segments the engine holds, sealed ones too."""
        ...

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream's (scope, stream), sorted."""
        ...

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        ...

    def stream_names(self, scope: str) -> list[str] | None:
        """The streams of ``scope``, sorted; None when there is no such scope."""
        ...

    # --- changing ---------------------------------------------------------------

    def create_scope(self, scope: str) -> bool:
        """Creates ``scope``; False when it exists."""
        ...

    def create_stream(
        self, scope: str, stream: str, decide: Callable[[], StreamCreated]
    ) -> Creation:
        """Creates the stream ``decide`` makes, once its scope exists and its name is free."""
        ...

    def change(
        self, scope: str, stream: str, decide: Decide[S], *, grouped: bool = False
    ) -> Record | None:
        """Stores the record ``decide`` makes of the stream, as one durable change.

        ``grouped``: a frequent, small change (an assertion) that may share a
        durable group with others; otherwise the change stands alone, ordered
        around every change before and after it (a scale, a seal).
        """
        ...

    def change_every_stream(
        self, decide: Decide[S], among: Callable[[StreamEntry[S]], bool] | None = None
    ) -> list[Record]:
        """Stores the record ``decide`` makes of each stream that has one (writers' timeouts).

        ``among``, when given, is a cheap look at a stream's live entry that
        picks the streams to decide about at all: the others are passed over
        without the copy or the staging a decision takes.
        """
        ...

    def truncate(
        self, scope: str, stream: str, decide: Callable[[StreamEntry[S]], StreamTruncated]
    ) -> tuple[StreamTruncated, int]:
        """Stores the truncation ``decide`` makes, frees what it removes; and the bytes freed."""
        ...

    def delete_stream(
        self, scope: str, stream: str, check: Callable[[StreamEntry[S]], object]
    ) -> None:
        """Deletes the stream once ``check`` (which refuses by raising) lets it."""
        ...

    def delete_scope(
        self, scope: str, check: Callable[[Sequence[str], Sequence[str]], object]
    ) -> bool:
        """Deletes ``scope`` once ``check(streams, state_keys)`` lets it; False: no such scope."""
        ...

    def append(
        self, target: S, plan: PlanBatch[S], riding: Riding[S] | None = None
    ) -> AppendOutcome:
        """Stores the change riding before the batch, the batch ``plan`` decides, the one after.

        In that order, durable on return. A refusal of ``riding.check`` or of
        ``plan`` comes before anything is stored.
        """
        ...

    def tick(self, now_ms: int, due: Callable[[S], bool]) -> int:
        """Gives every segment ``due`` says is idle an idle tick at ``now_ms``; returns how many."""
        ...

    # --- small durable values -----------------------------------------------------

    def state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted."""
        ...

    def get_state(self, key: str) -> Stored:
        """The value stored under ``key``."""
        ...

    def state_at_once(self, key: str) -> Stored | None:
        """The value stored under ``key`` if it can be had without waiting, else None.

        Without waiting: from memory, with no lock held by another thread
        and no I/O. None tells the caller to ask :meth:`get_state` on a thread.
        """
        ...

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, Stored]:
        """Stores ``value`` if the revision is still ``expected_revision``; and the value now."""
        ...

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, Stored]:
        """Deletes the value if its revision is still ``expected_revision``; and the value now."""
        ...

    # --- operations -----------------------------------------------------------------

    @property
    def accepting_writes(self) -> bool:
        """Whether the engine takes changes now."""
        ...

    def background_status(self) -> list[TaskStatus]:
        """How the engine's own background tasks are doing."""
        ...

    def journal_size(self) -> int | None:
        """The size of the engine's journal on disk, in bytes; None where there is none."""
        ...

    def location(self) -> str:
        """Where the engine keeps its data."""
        ...

    def replication(self) -> list[ReplicaState]:
        """How each replicated log stands (empty for one node)."""
        ...

    def leader_changes(self) -> dict[str, int]:
        """Leader elections of each log since the engine started."""
        ...

    def close(self) -> None:
        """Stops the engine's work, ends every wait at a tail, lets go of its resources."""
        ...
