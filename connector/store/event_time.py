"""Event time from the writers (seed 002's W_SET and W_IDLE): the rules, as pure functions.

A writer *asserts* an event time T: every later event of it has an event
time above T. Each segment keeps a set of writers (:class:`WriterMark` by
writer id): a writer joins with its first assertion (W_SET), leaves when it
marks itself idle or closes (W_IDLE), or when the store marks it idle after
it was silent (neither wrote nor asserted) for the idle timeout, and joins
again with its next assertion. The segment's event-time watermark at a
position is :func:`held_time`: the minimum over its active writers of
their latest assertion there, or None when no active writer holds it (such
a segment holds no reader back).

Assertions carry a number in their writer's sequence, like events, so a
retried one is a duplicate (:func:`decide_assertion` says so, and nothing
changes); an assertion below the writer's previous one is refused, naming
both, for a writer's promise never steps back. An assertion applies to every
open segment of the stream at once; successors start with the marks their
predecessors held at their seal (:func:`inherited_marks`).

Every function here is pure and every storage applies them, so the file
store's journal and any other storage's log give a segment the same set and
the same watermark at every position. Times are epoch milliseconds; a
mark's ``since`` and ``last_seen`` are on the segment's ingestion clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from connector.errors import InvalidArgumentError

__all__ = [
    "WriterMark",
    "after_append",
    "after_assertion",
    "after_idle",
    "caught_up",
    "decide_assertion",
    "held_time",
    "inherited_marks",
    "silent_writers",
]


@dataclass(frozen=True)
class WriterMark:
    """Where one writer stands in a segment's set.

    Attributes:
        event_time: its latest assertion; None before it asserted (an idle
            mark sent before any assertion).
        number: the number of its latest assertion or idle mark in its sequence.
        active: whether it holds the watermark (asserted, and neither marked
            idle nor timed out since).
        since: the segment's ingestion time of the change that set this mark.
        last_seen: the segment's ingestion time of its latest append or
            assertion here (what the idle timeout measures).
    """

    event_time: int | None
    number: int
    active: bool
    since: int
    last_seen: int


Marks = Mapping[str, WriterMark]


def held_time(marks: Marks) -> int | None:
    """The event-time watermark the marks give: the least active assertion, None if none is active.

    No event of an active writer after this point has an event time at or
    below it, as long as the writers keep their promises.
    """
    times = [m.event_time for m in marks.values() if m.active and m.event_time is not None]
    return min(times) if times else None


def decide_assertion(
    where: str, writer_id: str, previous: WriterMark | None, number: int, event_time: int | None
) -> bool:
    """Whether an assertion (``event_time``; None: an idle mark) numbered ``number`` is new.

    False for a duplicate: a number at or below the writer's latest here was
    seen already (a retry, or a writer replaying its id's sequence), and
    nothing changes.

    Raises:
        InvalidArgumentError: ``event_time`` is below the writer's previous
            assertion (``where`` names the stream or segment).
    """
    if previous is not None and number <= previous.number:
        return False
    if (
        event_time is not None
        and previous is not None
        and previous.event_time is not None
        and event_time < previous.event_time
    ):
        msg = (
            f"writer {writer_id!r} asserted event time {previous.event_time} on {where}; "
            f"{event_time} (assertion {number}) would step back below it"
        )
        raise InvalidArgumentError(msg)
    return True


def after_assertion(
    marks: Marks, writer_id: str, number: int, event_time: int, time_ms: int
) -> dict[str, WriterMark]:
    """The marks once ``writer_id`` asserted ``event_time`` at ``time_ms``: it joins or moves on."""
    updated = dict(marks)
    updated[writer_id] = WriterMark(event_time, number, True, time_ms, time_ms)
    return updated


def after_idle(
    marks: Marks, writer_ids: Iterable[str], time_ms: int, number: int | None = None
) -> dict[str, WriterMark]:
    """The marks once ``writer_ids`` left the set at ``time_ms``.

    ``number`` is the idle mark's number when a writer sent it (one writer);
    None when the store marked silent writers idle, which keeps their
    numbers. A writer never seen before is remembered idle (so a late copy
    of an earlier assertion of it stays a duplicate).
    """
    updated = dict(marks)
    for writer_id in writer_ids:
        previous = updated.get(writer_id)
        if previous is None:
            updated[writer_id] = WriterMark(None, number or 0, False, time_ms, time_ms)
            continue
        last_seen = time_ms if number is not None else previous.last_seen
        updated[writer_id] = replace(
            previous,
            number=previous.number if number is None else number,
            active=False,
            since=time_ms,
            last_seen=last_seen,
        )
    return updated


def after_append(marks: Marks, writer_id: str, time_ms: int) -> Marks:
    """The marks once ``writer_id`` appended at ``time_ms``: a member was seen."""
    previous = marks.get(writer_id)
    if previous is None or previous.last_seen >= time_ms:
        return marks
    updated = dict(marks)
    updated[writer_id] = replace(previous, last_seen=time_ms)
    return updated


def caught_up(pending: WriterMark | None, applied: WriterMark) -> WriterMark:
    """The pending mark once a durable change gave ``applied``: whichever change came later.

    Changes of one segment are stamped with strictly increasing times, so
    ``since`` orders them; ``last_seen`` only rises. At recovery (nothing
    pending) this is ``applied``; live, a change prepared after it stays.
    """
    if pending is None:
        return applied
    newer = pending if pending.since > applied.since else applied
    return replace(newer, last_seen=max(pending.last_seen, applied.last_seen))


def silent_writers(marks_of_segments: Sequence[Marks], now_ms: int, timeout_ms: int) -> list[str]:
    """The active writers of a stream's open segments silent for longer than ``timeout_ms``.

    A writer is seen when it appends to or asserts on any of them, so its
    latest ``last_seen`` over the segments counts. ``timeout_ms`` 0: never.
    """
    if timeout_ms <= 0:
        return []
    seen: dict[str, int] = {}
    for marks in marks_of_segments:
        for writer_id, mark in marks.items():
            if mark.active:
                seen[writer_id] = max(seen.get(writer_id, mark.last_seen), mark.last_seen)
    return sorted(w for w, last in seen.items() if now_ms - last > timeout_ms)


def inherited_marks(predecessors: Sequence[Marks], time_ms: int) -> dict[str, WriterMark]:
    """The marks a successor starts with at ``time_ms``: its predecessors' at their seal.

    A writer in several predecessors (a merge) takes its latest mark, by its
    number (an assertion reaches every open segment at once, so they agree).
    ``since`` is set to the successor's creation time, its own clock's
    start; ``last_seen`` is kept, so a silent writer's timeout runs on.
    """
    merged: dict[str, WriterMark] = {}
    for marks in predecessors:
        for writer_id, mark in marks.items():
            previous = merged.get(writer_id)
            if previous is None or (mark.number, not mark.active) > (
                previous.number,
                not previous.active,
            ):
                merged[writer_id] = mark
    return {w: replace(m, since=time_ms) for w, m in merged.items()}
