"""A read task: what one worker of an engine reads, the same value for every engine.

:func:`spread` cuts a batch's tasks into more, so that an engine with more
workers than the batch has lineage chains keeps them all busy (Kafka's
``minPartitions``: a batch that reads one segment is otherwise one task).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from connector.client.connection import StoreClient
from connector.errors import TidemarkError
from connector.model import PlannedRead, PlanRequest
from connector.reader.source.ranges import SegmentRange

__all__ = ["MIN_PIECE_BYTES", "ReadTask", "piece_counts", "spread"]

#: :func:`spread` cuts no piece smaller than this: a task costs an engine more than reading it.
MIN_PIECE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ReadTask:
    """Byte ranges one worker reads in order: a lineage chain, or a piece of one.

    Attributes:
        lane: the lineage's lane (:func:`~connector.reader.lineage.lineage_lane`),
            the same for every task of a lineage in every batch; a host that
            gives lane ``n`` to worker ``n % workers`` keeps one lineage on one
            worker, so a key's events are never overtaken by its later ones.
        ranges: whole events, in read order (successors after predecessors).
        watermark_in_force: the watermark in force while the task is read
            (the one before its batch), or None: an event at or below it is
            late (:func:`~connector.reader.source.timekeeping.is_late`).
    """

    lane: int
    ranges: tuple[SegmentRange, ...]
    watermark_in_force: int | None = None


def piece_counts(
    sizes: Sequence[int], at_least: int, min_piece_bytes: int = MIN_PIECE_BYTES
) -> list[int]:
    """Into how many pieces to cut ranges of ``sizes`` bytes so there are about ``at_least``.

    Kafka's rule for ``minPartitions``: each range gets pieces in proportion
    to its share of the bytes (rounded, at least one). Unlike Kafka, also
    when there are ``at_least`` ranges already: a batch's bytes are seldom
    spread evenly over its segments, and its slowest task holds up the
    batch. No piece is planned smaller than ``min_piece_bytes`` (a range
    below twice that stays whole).
    """
    total = sum(sizes)
    if total <= 0:
        return [1] * len(sizes)
    return [max(1, min(round(size * at_least / total), size // min_piece_bytes)) for size in sizes]


def spread(
    client: StoreClient,
    tasks: Sequence[ReadTask],
    at_least: int,
    min_piece_bytes: int = MIN_PIECE_BYTES,
) -> tuple[ReadTask, ...]:
    """``tasks`` cut so that there are about ``at_least``, each range into pieces of equal bytes.

    The pieces follow :func:`piece_counts`; each piece is a task of its own
    with its range's lane and watermark in force, in read order (a task
    whose ranges stay whole is kept as it is). Whole events only: the store
    says where, in one call for the whole batch
    (:meth:`StoreClient.plan_reads`, no event read back); an event larger
    than a piece makes that piece longer and the range's pieces fewer.
    Every byte of ``tasks`` is in exactly one piece.

    Raises:
        TidemarkError: the store's answer for a range (the call's own error,
            or the first plan's).
    """
    ranges = [r for task in tasks for r in task.ranges]
    counts = piece_counts([r.stop - r.start for r in ranges], at_least, min_piece_bytes)
    if all(count == 1 for count in counts):
        return tuple(tasks)
    plans = [
        PlanRequest(r.segment, r.start, max_bytes=(r.stop - r.start) * i // count)
        for r, count in zip(ranges, counts, strict=True)
        for i in range(1, count)
    ]
    answers = iter(client.plan_reads(plans))
    spread_tasks = []
    at = 0
    for task in tasks:
        mine = counts[at : at + len(task.ranges)]
        cuts = [_cuts(r, count, answers) for r, count in zip(task.ranges, mine, strict=True)]
        at += len(task.ranges)
        if all(count == 1 for count in mine):
            spread_tasks.append(task)
            continue
        spread_tasks.extend(replace(task, ranges=(piece,)) for pieces in cuts for piece in pieces)
    return tuple(spread_tasks)


def _cuts(
    segment_range: SegmentRange, count: int, answers: Iterator[PlannedRead | TidemarkError]
) -> list[SegmentRange]:
    """``segment_range`` in the pieces the store's next ``count - 1`` answers end."""
    ends = []
    for _ in range(count - 1):
        answer = next(answers)
        if isinstance(answer, TidemarkError):
            raise answer
        ends.append(answer.next_offset)
    bounds = [segment_range.start]
    for end in ends:
        if bounds[-1] < end < segment_range.stop:
            bounds.append(end)
    bounds.append(segment_range.stop)
    return [
        SegmentRange(segment_range.segment, start, stop)
        for start, stop in zip(bounds, bounds[1:], strict=False)
    ]
