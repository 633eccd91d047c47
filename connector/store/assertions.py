"""Writers' assertions on a stream, whatever stores it: how one is decided and applied.

A writer asserts event time (or marks itself idle) on a stream; the store
records it on every open segment at once, as one record
(:class:`~connector.store.records.WatermarkAsserted`), each segment stamping
it with its own ingestion clock. Silent writers are marked idle by the store
(:class:`~connector.store.records.WritersTimedOut`). The functions here
decide such a change from a stream's pending state (checking the request
against the writers' marks with :mod:`connector.store.event_time`) and apply
a durable record to the segments, so every storage gives a stream the same
marks and event-time index from the same history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from connector.errors import FailedPreconditionError, InvalidArgumentError
from connector.model import Fence
from connector.names import SegmentId
from connector.store.event_time import (
    Marks,
    WriterMark,
    after_assertion,
    after_idle,
    decide_assertion,
    silent_writers,
)
from connector.store.published import PublishedSegment
from connector.store.records import SegmentTime, WatermarkAsserted, WritersTimedOut
from connector.store.requests import duplicates_in_batch
from connector.store.streams import StreamEntry

__all__ = [
    "apply_asserted",
    "assertion_is_new",
    "apply_timed_out",
    "assertion_record",
    "marks_after",
    "open_segments",
    "timeout_record",
]

S = TypeVar("S", bound=PublishedSegment)


def open_segments(entry: StreamEntry[S]) -> list[S]:
    """The stream's segments that take changes (not sealed, pending included), by number."""
    return [
        entry.segments[n] for n in sorted(entry.segments) if not entry.segments[n].pending_sealed
    ]


def assertion_record(
    entry: StreamEntry[S],
    writer_id: str,
    number: int,
    event_time: int | None,
    fences: Mapping[str, Fence],
    now_ms: int,
) -> WatermarkAsserted | None:
    """The record of ``writer_id``'s assertion ``number`` (``event_time`` None: idle).

    None when it is a duplicate on every open segment (nothing to store).
    Each segment that takes it stamps it with its next ingestion time.

    Raises:
        FailedPreconditionError: the stream is sealed; or a fence leaves a
            gap (numbers below ``discarded_from`` that were never stored).
        InvalidArgumentError: ``event_time`` is below the writer's previous
            assertion (the message names both); a fence names a segment of
            another stream.
        NotFoundError: a fence names a segment the stream does not have.
    """
    taking = _taking(entry, writer_id, number, event_time)
    if not taking:
        return None
    fenced = _fences(entry, writer_id, fences)
    stamps = tuple(SegmentTime(s.number, s.next_time(now_ms)) for s in taking)
    return WatermarkAsserted(
        entry.scope, entry.stream, writer_id, number, event_time, stamps, fenced
    )


def assertion_is_new(
    entry: StreamEntry[S], writer_id: str, number: int, event_time: int | None
) -> bool:
    """Whether an assertion would change anything (False: a duplicate); changes nothing itself.

    Raises:
        FailedPreconditionError: the stream is sealed.
        InvalidArgumentError: ``event_time`` is below the writer's previous assertion.
    """
    return bool(_taking(entry, writer_id, number, event_time))


def _taking(entry: StreamEntry[S], writer_id: str, number: int, event_time: int | None) -> list[S]:
    """The open segments an assertion is new on, by :func:`decide_assertion`."""
    segments = open_segments(entry)
    if entry.sealed or not segments:
        msg = f"stream {entry.scope}/{entry.stream} is sealed: it takes no assertions"
        raise FailedPreconditionError(msg)
    where = f"stream {entry.scope}/{entry.stream}"
    return [
        s
        for s in segments
        if decide_assertion(where, writer_id, s.pending_marks().get(writer_id), number, event_time)
    ]


def _fences(
    entry: StreamEntry[S], writer_id: str, fences: Mapping[str, Fence]
) -> tuple[tuple[int, int], ...]:
    """``(segment number, last event number)`` of each fence that closes a gap still open."""
    fenced = []
    for name, fence in sorted(fences.items()):
        parsed = SegmentId.parse(name)
        if (parsed.scope, parsed.stream) != (entry.scope, entry.stream):
            msg = f"fence segment {name!r} is not a segment of {entry.scope}/{entry.stream}"
            raise InvalidArgumentError(msg)
        segment = entry.segment(parsed.number)
        if segment.pending_sealed:
            continue  # a sealed segment takes no late copy anyway
        expected = segment.expected_event_number(writer_id)
        duplicates_in_batch(
            segment.name, writer_id, expected, fence.next_event_number, 0, fence.discarded_from
        )
        if expected < fence.next_event_number:
            fenced.append((segment.number, fence.next_event_number - 1))
    return tuple(fenced)


def may_have_silent_writers(entry: StreamEntry[S]) -> bool:
    """Whether an open segment of the stream holds an active writer's mark (a cheap look).

    Only such a stream can have a writer to mark idle (:func:`timeout_record`);
    a stream nobody asserted event time on is passed over without a decision.
    """
    if entry.sealed:
        return False
    return any(
        mark.active
        for segment in entry.segments.values()
        if not segment.pending_sealed
        for mark in segment.pending_marks().values()
    )


def timeout_record(entry: StreamEntry[S], now_ms: int, timeout_ms: int) -> WritersTimedOut | None:
    """The record marking idle the stream's writers silent for over ``timeout_ms``; None if none is.

    A writer is silent when it neither appended to nor asserted on any open
    segment of the stream for that long (by the store's clock).
    """
    segments = open_segments(entry)
    if entry.sealed or not segments:
        return None
    silent = silent_writers([s.pending_marks() for s in segments], now_ms, timeout_ms)
    if not silent:
        return None
    # Only the segments where a silent writer is active change.
    reached = [s for s in segments if any(_active(s.pending_marks(), w) for w in silent)]
    stamps = tuple(SegmentTime(s.number, s.next_time(now_ms)) for s in reached)
    return WritersTimedOut(entry.scope, entry.stream, tuple(silent), stamps)


def _active(marks: Marks, writer_id: str) -> bool:
    mark = marks.get(writer_id)
    return mark is not None and mark.active


def marks_after(
    marks: Marks, record: WatermarkAsserted | WritersTimedOut, time_ms: int
) -> tuple[dict[str, WriterMark], Sequence[str]]:
    """A segment's marks once ``record`` reached it at ``time_ms``, and the writers it changed."""
    if isinstance(record, WritersTimedOut):
        return after_idle(marks, record.writer_ids, time_ms), record.writer_ids
    if record.event_time is None:
        return after_idle(marks, (record.writer_id,), time_ms, record.number), (record.writer_id,)
    changed = after_assertion(marks, record.writer_id, record.number, record.event_time, time_ms)
    return changed, (record.writer_id,)


def apply_asserted(entry: StreamEntry[S], record: WatermarkAsserted) -> None:
    """Publishes an assertion (or idle mark) on the segments it reached, and its fences."""
    for number, last in record.fences:
        entry.segments[number].merge_writer_numbers({record.writer_id: last})
    _apply(entry, record)


def apply_timed_out(entry: StreamEntry[S], record: WritersTimedOut) -> None:
    """Publishes the store's idle marks of silent writers on the segments they reached."""
    _apply(entry, record)


def _apply(entry: StreamEntry[S], record: WatermarkAsserted | WritersTimedOut) -> None:
    for stamp in record.segments:
        segment = entry.segments[stamp.number]
        marks, changed = marks_after(segment.marks(), record, stamp.time_ms)
        segment.apply_marks(marks, changed, stamp.time_ms)
