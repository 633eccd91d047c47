"""A stream's segments and lineage, whatever stores them: how a change is planned and applied.

Every storage records the same changes of a stream (the records of
:mod:`connector.store.records`): its creation, scaling, sealing and
truncation. The functions here decide a change from the current state
(checking the request, stamping times with the segments' ingestion clocks)
and apply a durable record to a :class:`StreamEntry`, so the file store's
journal and the JetStream store's log give the same stream the same
segments, epochs, lineage and seal times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from connector.errors import (
    FailedPreconditionError,
    NotFoundError,
    SegmentSealedError,
)
from connector.model import SegmentDescription, StreamDescription
from connector.names import SegmentId
from connector.store.changes import StreamChanges
from connector.store.key_ranges import even_ranges, scale_ranges
from connector.store.lineage import wholly_before
from connector.store.published import PublishedSegment, SegmentIdentity
from connector.store.records import (
    KeyRange,
    SegmentSealing,
    StreamCreated,
    StreamScaled,
    StreamSealed,
    StreamTruncated,
)
from connector.store.requests import check_open_segments

__all__ = [
    "MakeSegment",
    "StreamEntry",
    "apply_created",
    "apply_scaled",
    "apply_sealed",
    "apply_truncated_heads",
    "created_record",
    "place",
    "scale_record",
    "seal_record",
    "truncation_record",
]

S = TypeVar("S", bound=PublishedSegment)

#: Makes the segment of a stream that ``identity`` describes (its storage's kind of segment).
MakeSegment = Callable[["StreamEntry[S]", SegmentIdentity], S]


@dataclass
class StreamEntry(Generic[S]):
    """A stream: its epoch, its seal, its segments by number, and the record of their changes.

    A copy of an entry (a view taken for a decision) shares ``changes``: one
    record per stream as a server holds it (:mod:`connector.store.changes`).
    """

    scope: str
    stream: str
    epoch: int = 0
    sealed: bool = False
    segments: dict[int, S] = field(default_factory=dict)
    changes: StreamChanges[PublishedSegment] = field(default_factory=StreamChanges)

    def segment(self, number: int) -> S:
        """The segment ``number``, or NotFoundError."""
        found = self.segments.get(number)
        if found is None:
            msg = f"segment {self.scope}/{self.stream}/{number} does not exist"
            raise NotFoundError(msg)
        return found

    def segment_name(self, number: int) -> str:
        """The one spelling of this stream's segment ``number``."""
        return str(SegmentId(self.scope, self.stream, number))

    def describe(self) -> StreamDescription:
        """Every segment of the stream, with ranges, epochs and lineage."""
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


# --- planning a change from the current (pending) state ----------------------------


def created_record(scope: str, stream: str, segment_count: int, now_ms: int) -> StreamCreated:
    """The creation of a stream whose ``segment_count`` segments split [0, 1) evenly."""
    ranges = even_ranges(0.0, 1.0, segment_count)
    segments = tuple(KeyRange(n, low, high) for n, (low, high) in enumerate(ranges))
    return StreamCreated(scope, stream, now_ms, segments)


def scale_record(
    entry: StreamEntry[S],
    numbers: Sequence[int],
    split_count: int,
    now_ms: int,
    max_open_segments: int,
) -> StreamScaled:
    """A split of one segment into ``split_count`` or a merge of adjacent ones (0).

    The sealed segments' seal times come from their own ingestion clocks;
    the successors are created after the last of them, so their initial
    watermark is never below a predecessor's last one.

    Raises:
        NotFoundError: a segment does not exist.
        SegmentSealedError: a segment is sealed already.
        InvalidArgumentError: the split or merge is malformed.
        ResourceExhaustedError: the stream would have more than
            ``max_open_segments`` open segments.
    """
    segments = [entry.segment(n) for n in numbers]
    for segment in segments:
        if segment.pending_sealed:
            msg = f"segment {segment.name!r} is sealed already and cannot be scaled"
            raise SegmentSealedError(msg, segment.name, segment.successors)
    if len(segments) == 1 and split_count > 1:  # checked before the ranges are made
        open_now = sum(1 for s in entry.segments.values() if not s.pending_sealed)
        name = f"{entry.scope}/{entry.stream}"
        check_open_segments(name, open_now - 1 + split_count, max_open_segments)
    ranges = scale_ranges(segments, split_count)
    sealed = tuple(SegmentSealing(s.number, s.next_time(now_ms)) for s in segments)
    first = max(entry.segments) + 1
    created = tuple(KeyRange(first + i, low, high) for i, (low, high) in enumerate(ranges))
    time_ms = max(now_ms, max(s.time_ms for s in sealed) + 1)
    return StreamScaled(entry.scope, entry.stream, sealed, created, time_ms)


def seal_record(entry: StreamEntry[S], now_ms: int) -> StreamSealed:
    """The seal of every open segment of the stream, each at its own next time.

    Raises:
        FailedPreconditionError: the stream is sealed already.
    """
    if entry.sealed:
        msg = f"stream {entry.scope}/{entry.stream} is sealed already"
        raise FailedPreconditionError(msg)
    open_segments = [s for s in entry.segments.values() if not s.pending_sealed]
    sealed = tuple(SegmentSealing(s.number, s.next_time(now_ms)) for s in open_segments)
    return StreamSealed(entry.scope, entry.stream, sealed)


def truncation_record(entry: StreamEntry[S], cut: Mapping[int, int]) -> StreamTruncated:
    """The truncation of the stream at ``cut`` (segment number -> offset).

    Raises:
        NotFoundError: a cut segment does not exist.
        InvalidArgumentError: an offset is past its segment's end or not at
            an event boundary.
    """
    for number, offset in sorted(cut.items()):
        segment = entry.segment(number)
        segment.check_within(offset, segment.pending_end)
        if offset > segment.head:
            segment.check_boundary(offset)
    removed = tuple(
        n for n in wholly_before(entry.segments, cut) if not entry.segments[n].wholly_truncated
    )
    heads = tuple(sorted(cut.items()))
    return StreamTruncated(entry.scope, entry.stream, heads, removed)


# --- applying a durable record -----------------------------------------------------


def apply_created(entry: StreamEntry[S], record: StreamCreated, make: MakeSegment[S]) -> None:
    """Adds the segments a stream was created with."""
    for r in record.segments:
        place(entry, make(entry, _identity(entry, r, record.time_ms, ())))


def apply_scaled(entry: StreamEntry[S], record: StreamScaled, make: MakeSegment[S]) -> list[S]:
    """Seals the scaled segments and adds their successors, one epoch on; returns the successors.

    The successors start with the writers' marks their predecessors held at
    their seal (see :func:`connector.store.event_time.inherited_marks`).
    """
    entry.epoch += 1
    predecessors = tuple(entry.segments[s.number].name for s in record.sealed)
    marks = [entry.segments[s.number].marks() for s in record.sealed]
    created = [
        make(entry, _identity(entry, r, record.time_ms, predecessors)) for r in record.created
    ]
    for segment in created:
        segment.inherit_marks(marks)
        place(entry, segment)
    successors = tuple(s.name for s in created)
    for sealing in record.sealed:
        entry.segments[sealing.number].seal(sealing.time_ms, successors)
    return created


def apply_sealed(entry: StreamEntry[S], record: StreamSealed) -> None:
    """Seals the stream and its open segments."""
    entry.sealed = True
    for sealing in record.sealed:
        entry.segments[sealing.number].seal(sealing.time_ms)


def apply_truncated_heads(entry: StreamEntry[S], record: StreamTruncated) -> None:
    """Moves each cut segment's first readable offset (removing data is the storage's part)."""
    for number, head in record.heads:
        entry.segments[number].truncate(head)


def _identity(
    entry: StreamEntry[S], key_range: KeyRange, time_ms: int, predecessors: tuple[str, ...]
) -> SegmentIdentity:
    """A new segment of ``entry``'s current epoch, created at ``time_ms``."""
    return SegmentIdentity(
        name=entry.segment_name(key_range.number),
        number=key_range.number,
        key_low=key_range.low,
        key_high=key_range.high,
        epoch=entry.epoch,
        creation_time=time_ms,
        predecessors=predecessors,
    )


def place(entry: StreamEntry[S], segment: S) -> None:
    """Adds ``segment`` to the stream: a change of the stream, noted in its record."""
    entry.segments[segment.number] = segment
    segment.join(entry.changes)
