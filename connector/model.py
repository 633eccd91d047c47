"""Value types shared by the store, the server and the client.

All are frozen dataclasses; times are epoch milliseconds on the store's
ingestion clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.errors import TidemarkError

__all__ = [
    "AppendResult",
    "initial_watermark",
    "AssertionResult",
    "Fence",
    "FetchPosition",
    "FetchResult",
    "PlanRequest",
    "PlannedRead",
    "ReadResult",
    "ReplicaState",
    "SegmentDescription",
    "SegmentInfo",
    "SegmentTail",
    "StateValue",
    "StreamDescription",
    "StreamTails",
    "TimeCount",
    "TruncationResult",
    "UnreadWork",
    "WriterAssertion",
]


def initial_watermark(creation_time: int) -> int:
    """A segment's watermark before its first event: its creation time - 1 (PDP 26).

    No event of a segment is ingested at or before its creation, so this
    holds wherever the segment is read from: the store's watermark index
    starts with it, and readers take it for a segment not read yet.
    """
    return creation_time - 1


@dataclass(frozen=True)
class SegmentDescription:
    """A segment of a stream: its key range ``[key_low, key_high)`` and lineage."""

    segment: str
    key_low: float
    key_high: float
    epoch: int
    sealed: bool
    creation_time: int
    predecessors: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()

    def owns(self, key: float) -> bool:
        """Whether routing key position ``key`` falls in this segment's range."""
        return self.key_low <= key < self.key_high


@dataclass(frozen=True)
class StreamDescription:
    """Every segment a stream ever had; the open ones form the current epoch."""

    scope: str
    stream: str
    epoch: int
    sealed: bool
    segments: tuple[SegmentDescription, ...]

    @property
    def open_segments(self) -> tuple[SegmentDescription, ...]:
        """The segments of the current epoch, ordered by key range."""
        return tuple(sorted((s for s in self.segments if not s.sealed), key=lambda s: s.key_low))

    @property
    def initial_segments(self) -> tuple[SegmentDescription, ...]:
        """The segments the stream was created with (epoch 0)."""
        return tuple(s for s in self.segments if s.epoch == 0)

    def segment(self, name: str) -> SegmentDescription:
        """The description of segment ``name``; raises KeyError when absent."""
        for description in self.segments:
            if description.segment == name:
                return description
        raise KeyError(name)


@dataclass(frozen=True)
class AppendResult:
    """The outcome of an append, returned once the appended events are durable.

    ``duplicates`` events at the start of the batch were skipped: the store
    had their numbers from this writer id already. ``resent`` (set by the
    client) says the request went out more than once because an answer was
    lost, so those may be this very batch, stored by an earlier send.
    ``assertion`` is the outcome of an assertion that rode on the append
    after its events, ``joining`` of one that rode before them (None when
    none did): durable with the events, as they are.
    """

    write_offset: int
    ingestion_time: int
    appended: int
    duplicates: int
    resent: bool = False
    assertion: AssertionResult | None = None
    joining: AssertionResult | None = None


@dataclass(frozen=True)
class ReadResult:
    """Whole framed events from ``offset`` to ``next_offset``.

    ``watermark`` holds after the data: no event at or beyond ``next_offset``
    (nor in a successor) has an ingestion time at or before it.
    ``event_time_watermark`` is the writers' (seed 002) after the data: no
    event at or beyond ``next_offset`` of a writer active there has an event
    time at or below it, as long as the writers keep their promises; None
    when no active writer holds it. ``event_time_floor`` is the least of the
    writers' event-time watermarks in force at the data's events (where it
    starts, and wherever a writer joined below the others inside it); the one
    at ``offset`` without data; None when none was held at any of them.
    ``checksum`` is the CRC-32 of ``data`` from a store that checked every
    frame of it before answering; None when nobody did (then a reader checks
    each frame, :func:`connector.framing.decode_columns`).
    """

    segment: str
    offset: int
    next_offset: int
    data: bytes
    watermark: int
    end_of_segment: bool
    successors: tuple[str, ...] = ()
    event_time_watermark: int | None = None
    event_time_floor: int | None = None
    checksum: int | None = None


@dataclass(frozen=True)
class TimeCount:
    """``count`` items of a segment's work, each holding at least ``time`` (epoch ms)."""

    time: int
    count: int


@dataclass(frozen=True)
class UnreadWork:
    """A segment's work from a position, as the store knows it: compact, bounded, conservative.

    ``unread``: the events from the position to the tail, each by the
    segment's ingestion watermark just before it (the watermark a reader
    holds when it reaches it), in at most the buckets asked for, oldest
    first; a bucket's ``time`` is the least of its events'. ``writers``:
    the writers active at the position, by their latest assertion there
    (a writer whose assertion there is no longer remembered counts at the
    segment's event-time watermark there, the least of them), in buckets
    likewise. ``tail_watermark``: the segment's ingestion watermark at its
    tail (no event written later is ingested at or before it).
    """

    unread: tuple[TimeCount, ...]
    writers: tuple[TimeCount, ...]
    tail_watermark: int


@dataclass(frozen=True)
class PlannedRead:
    """Where a read of whole events from ``offset`` under a budget would stop, without the data.

    ``events`` events lie in ``[offset, next_offset)``; ``watermark`` holds
    after them, as a :class:`ReadResult`'s would; ``end_of_segment`` says the
    segment is sealed and ``next_offset`` is its end, and then ``successors``
    are its successors; ``at_tail`` says ``next_offset`` is the segment's
    committed end when answered; ``event_time_watermark`` is the writers'
    after them, as a read's would be. ``first_ingestion_time`` is the
    ingestion time of the event at ``offset`` (None: no event planned): the
    oldest of them, since a segment's ingestion times increase.
    """

    segment: str
    offset: int
    next_offset: int
    events: int
    watermark: int
    end_of_segment: bool
    at_tail: bool
    successors: tuple[str, ...] = ()
    event_time_watermark: int | None = None
    #: The segment's work from ``offset``, when asked for (see :class:`UnreadWork`).
    work: UnreadWork | None = None
    first_ingestion_time: int | None = None


@dataclass(frozen=True)
class TruncationResult:
    """What a truncation removed: the segments wholly before the cut, and the bytes freed."""

    removed_segments: tuple[str, ...]
    bytes_freed: int


@dataclass(frozen=True)
class WriterAssertion:
    """A writer active in a segment's event time: its last assertion, and when it was last seen.

    ``last_seen`` is the ingestion time of its latest append to or assertion
    on the segment; the store marks it idle once it is silent for its idle
    timeout.
    """

    writer_id: str
    event_time: int
    last_seen: int


@dataclass(frozen=True)
class Fence:
    """Event numbers a writer gave up on in a segment: ``discarded_from`` to ``next_event_number``.

    The writer discarded them without learning whether they were stored.
    Sent with an assertion: once it is stored, no late copy of them can be
    (as once an append announcing the gap is), so no event of the writer's
    can land after its promise.
    """

    discarded_from: int
    next_event_number: int


@dataclass(frozen=True)
class Assertion:
    """A writer's assertion riding on an append: ``event_time`` (None: idle), numbered ``number``.

    The store applies it after the append's events (or, given as the
    append's ``joining`` assertion, before them: the writer joins the set
    holding the event-time watermark before its events are stored), on
    every open segment of the segment's stream, as
    :meth:`SegmentStore.assert_watermark` does, in the same call: an
    assertion that rides costs no call (and, on the file store, no commit)
    of its own. It is decided before anything is stored: refused, it
    refuses the append with it, and an append refused for its own reasons
    (a sealed segment, a gap) stores no assertion. A retry of the call
    stores nothing twice (events and assertions are numbered).
    """

    number: int
    event_time: int | None


@dataclass(frozen=True)
class AssertionResult:
    """The outcome of an assertion or idle mark, returned once it is durable.

    ``stored`` is False for a duplicate: its number was seen already (a
    retry whose first send was stored), and nothing changed. ``segments``
    are the open segments it reached. ``resent`` (set by the client) says
    the request went out more than once because an answer was lost.
    """

    stored: bool
    segments: tuple[str, ...]
    resent: bool = False


@dataclass(frozen=True)
class SegmentInfo:
    """A segment's attributes.

    ``first_offset`` is the first readable offset: 0 unless the stream was
    truncated, the segment's end (``write_offset``) when a truncation took
    all of its data. ``event_time_watermark`` is the writers' at the tail
    (None: no active writer holds it), and ``writers`` the active writers
    with their last assertions.
    """

    segment: str
    creation_time: int
    last_write_time: int
    write_offset: int
    sealed: bool
    watermark: int
    key_low: float
    key_high: float
    first_offset: int = 0
    event_time_watermark: int | None = None
    writers: tuple[WriterAssertion, ...] = ()


@dataclass(frozen=True)
class StateValue:
    """A durable value with a revision; revision 0 means no value is stored.

    ``unchanged``: the revision is the one the reader said it holds
    (``known_revision``), and ``value`` was not sent (it is empty).
    """

    key: str
    value: bytes
    revision: int
    server_time: int
    unchanged: bool = False


@dataclass(frozen=True)
class ReplicaState:
    """One replica of a replicated log of a store, as its leader reports it (metrics).

    Attributes:
        log: what the log holds: a stream (``scope/stream``), ``catalog`` or ``state``.
        replica: the node holding the replica.
        leader: whether it is the log's leader.
        current: whether it is up to date with the leader.
        lag: how many operations it is behind the leader.
        seen_ms_ago: how long ago the leader last heard from it (None: unknown).
    """

    log: str
    replica: str
    leader: bool
    current: bool
    lag: int
    seen_ms_ago: int | None


@dataclass(frozen=True)
class SegmentTail:
    """A segment as a description of a stream's tails gives it: its end, watermarks and lineage.

    ``write_offset`` is the published end, ``first_offset`` the first
    readable offset (truncation), ``watermark`` and ``event_time_watermark``
    those at the tail (None: no active writer holds the event time).
    ``version`` is the answering server's version of the segment's last
    change in its stream (see :class:`StreamTails`).
    """

    segment: str
    version: int
    write_offset: int
    first_offset: int
    watermark: int
    event_time_watermark: int | None
    sealed: bool
    last_write_time: int
    creation_time: int
    key_low: float
    key_high: float
    epoch: int
    predecessors: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamTails:
    """One stream's segments' tails, as a server had them, since what the caller knew.

    ``incarnation`` and ``version`` name what the answering server had
    applied: give them back to learn only what changes after. ``complete``
    says ``segments`` holds every segment of the stream (the caller knew
    another incarnation, or nothing); otherwise it holds only the segments
    that changed after the version the caller gave, with their state now,
    and a caller keeps its other segments as they were. Segments come in
    the order of their last change, oldest first.
    """

    scope: str
    stream: str
    incarnation: int
    version: int
    complete: bool
    segments: tuple[SegmentTail, ...]
    #: The store's ingestion clock when it answered (epoch ms; 0 from a server that did not say).
    server_time: int = 0

    @property
    def name(self) -> str:
        """``scope/stream``."""
        return f"{self.scope}/{self.stream}"


@dataclass(frozen=True)
class PlanRequest:
    """One plan of a batch (``StoreClient.plan_reads``): as ``plan_read``'s arguments.

    ``work_buckets`` > 0 asks for the segment's :class:`UnreadWork` from
    ``offset`` too, in at most that many buckets each.
    """

    segment: str
    offset: int
    max_events: int | None = None
    max_bytes: int | None = None
    before_time: int | None = None
    work_buckets: int = 0


@dataclass(frozen=True)
class FetchPosition:
    """Where a fetch session's reader is in a segment, and the watermarks it was told there.

    Both ends of a session keep it: the server to answer only what is new,
    the reader to open the session again from what it received.
    ``known_watermark`` None: nothing told yet (the next answer tells it).
    """

    offset: int
    known_watermark: int | None = None
    known_event_time: int | None = None

    def after(self, read: ReadResult) -> FetchPosition:
        """The position once ``read`` (an answer of the segment) was received."""
        return FetchPosition(read.next_offset, read.watermark, read.event_time_watermark)

    def is_news(self, read: ReadResult) -> bool:
        """Whether ``read``, from this position, tells anything not known: data, a rise, an end."""
        return bool(
            read.data
            or read.end_of_segment
            or self.known_watermark is None
            or read.watermark > self.known_watermark
            or read.event_time_watermark != self.known_event_time
        )


@dataclass(frozen=True)
class FetchResult:
    """One answer of a fetch session (ReadSegments): the segments with something new.

    ``reads`` hold, per segment, whole events from where its reader was
    (then the segment waits to be re-armed), or no data and a higher or
    other watermark (it stays armed), or its end (it left the session).
    ``failures`` name the segments that failed, each with the error its own
    read would have raised (they left the session). ``reopened`` says the
    session was opened anew for this answer (the server had lost it).
    """

    reads: tuple[ReadResult, ...] = ()
    failures: tuple[tuple[str, TidemarkError], ...] = ()
    reopened: bool = False
