"""The percentile watermark (seed 001): the time at least a fraction p of a group's work lies after.

The perfect watermark (:func:`~connector.groups.state.least_unfinished`)
waits for the oldest piece of work; "if mostly correct is sufficient", a
watermark at percentile ``p`` waits only until a fraction ``p`` of the
work lies after it, and so advances sooner and more smoothly, at the cost
of the rest coming out late (flagged and counted, never dropped).

The work, per unfinished segment, is what the store says of it from the
group's position (:class:`~connector.model.UnreadWork`):

- in the ingestion-time domain (:func:`ingestion_percentile`), the unread
  events, each by the segment's watermark just before it (an event lies
  after ``W`` when that is at or above ``W``); no segment's future events
  may come out late, so the watermark is also at most the least of the
  segments' tail watermarks;
- in the event-time domain (:func:`writers_percentile`), the writers
  active at the position, each by its latest assertion there (a writer
  lies after ``W`` when its assertion is at or above ``W`` in every
  segment). A writer asserts on every open segment of its stream, so the
  store tells it once per segment, at a different assertion in each (the
  group's position differs), and the store names no writer: so at most
  ``n - ceil(p * n)`` of all the segments' entries may lie below ``W``,
  ``n`` the most writers any one segment holds (never more than the
  writers). Then at most that many writers have any entry below ``W``, and
  at least a fraction ``p`` of them lie wholly after it: never above the
  percentile over each writer's least assertion, and tight when a few
  writers straggle on all segments at once only if ``n * (1 - p)`` covers
  their entries in every segment (a writer counted in each of ``s``
  segments uses up ``s`` of the allowance).

**Over a run, not per sync (ingestion time).** Applied afresh at each sync
to the work still unread, the rule would let ``1 - p`` of what remains fall
below ``W`` each time, and the events it made late before would not count:
over a backlog read in ``m`` syncs the late share compounds to about
``1 - p ** m``. So the ingestion-time rule carries what the run has done,
as :class:`RunCounts`: the events that left the work (``read``) and how many
of them the watermark had passed (``late``). The events the run has seen
are those read plus those unread now, and the events it will have made
late at ``W`` are those late plus the unread events below ``W`` (every one
of them comes out late: the watermark never steps back). ``W`` may pass
unread work only while that stays within ``seen - ceil(p * seen)``: so at
every sync, and so at the end of the run, at most about ``1 - p`` of the
events seen are late (to a bucket of the store's answer: a bucket counts
at its least time, so the rule only overcounts what it passes). At the
first sync (nothing read) it is the per-sync rule; the events below the
last ``W`` still unread are counted at each sync as unread-and-late, so
nothing is charged twice. The hosts carry the counts
(:func:`counts_between` from the store's answers, or a reader's own
observed counts) and give them back at the next sync.

At ``p = 1`` both are the perfect watermark over the same values. Pure
functions over plain values; the hosts ask the store for the work
(:mod:`connector.reader.unread_work`) and keep the watermarks they yield
ascending (:class:`~connector.reader.source.timekeeping.TimeKeeping`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from connector.errors import InvalidArgumentError
from connector.model import TimeCount, UnreadWork
from connector.timestamps import END_OF_TIME

__all__ = [
    "NO_RUN",
    "PERFECT",
    "RunCounts",
    "check_percentile",
    "counts_between",
    "ingestion_percentile",
    "percentile_time",
    "writers_percentile",
]

#: The percentile of the perfect watermark: all of the work lies after it.
PERFECT = 1.0

#: A product ``p * n`` this close above a whole number counts as that number (0.9 * 10 is 9).
_ROUNDING = 1e-9


def check_percentile(p: object, option: str = "watermark_percentile") -> float:
    """``p`` as a float in (0, 1], or InvalidArgumentError naming ``option`` and the value."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        msg = f"{option} must be a number in (0, 1] (1: the perfect watermark), got {p!r}"
        raise InvalidArgumentError(msg)
    return float(p)


def percentile_time(items: Iterable[TimeCount], p: float) -> int | None:
    """The greatest ``W`` such that items holding at least ``W`` are a fraction ``p`` or more.

    With ``n`` items in all, at least ``ceil(p * n)`` of them (at least
    one) hold ``W`` or more; at ``p = 1`` that is the least item's time.
    None when there is no item.
    """
    counted_items = [i for i in items if i.count > 0]
    total = sum(i.count for i in counted_items)
    return _time_below_at_most(counted_items, total - _needed(total, p))


def _needed(total: int, p: float) -> int:
    """``ceil(p * total)``, at least one and at most ``total`` (0 for none)."""
    return min(total, max(1, math.ceil(p * total - _ROUNDING))) if total else 0


def _time_below_at_most(items: list[TimeCount], allowed: int) -> int | None:
    """The greatest ``W`` with at most ``allowed`` of ``items``' counts below it; None for none."""
    ordered = sorted(items, key=lambda i: i.time, reverse=True)
    total = sum(i.count for i in ordered)
    if not total:
        return None
    needed = max(1, total - allowed)
    counted = 0
    for item in ordered:
        counted += item.count
        if counted >= needed:
            break
    return item.time


@dataclass(frozen=True)
class RunCounts:
    """What a run's watermark has done so far, carried from one sync to the next.

    Attributes:
        read: events that left the work (read) since the run began.
        late: how many of them the watermark had passed (came out late).
    """

    read: int = 0
    late: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.late <= self.read:
            msg = f"run counts need 0 <= late <= read, got read={self.read!r} late={self.late!r}"
            raise InvalidArgumentError(msg)

    def plus(self, read: int, late: int) -> RunCounts:
        """These counts with ``read`` more events read, ``late`` of them late."""
        return RunCounts(self.read + read, self.late + late)


#: A run that has read nothing yet.
NO_RUN = RunCounts()


def ingestion_percentile(
    work: Iterable[UnreadWork],
    p: float,
    run: RunCounts = NO_RUN,
    counted: Iterable[UnreadWork] | None = None,
) -> int:
    """The group watermark at percentile ``p`` in the ingestion-time domain, over the run.

    The least of the segments' tail watermarks and of the greatest ``W``
    with ``run.late`` plus the unread events below ``W`` within
    ``seen - ceil(p * seen)``, ``seen`` being ``run.read`` plus the unread
    events (see the module docstring); always at least one unread event
    lies at or after it. ``counted`` is the part of ``work`` whose events
    the run reads (default: all of it; a reader of a group counts its own
    segments, whose events are the only ones it makes late); the tails of
    all of ``work`` bound ``W``. END_OF_TIME for no segment.
    """
    segments = list(work)
    bound = min((w.tail_watermark for w in segments), default=END_OF_TIME)
    mine = segments if counted is None else list(counted)
    items = [i for w in mine for i in w.unread if i.count > 0]
    unread = sum(i.count for i in items)
    seen = run.read + unread
    allowed = max(0, seen - _needed(seen, p) - run.late)
    at = _time_below_at_most(items, allowed)
    return bound if at is None else min(bound, at)


def counts_between(
    run: RunCounts, before: Iterable[UnreadWork], after: Iterable[UnreadWork], passed: int | None
) -> RunCounts:
    """``run`` plus the events read between two positions, and those of them below ``passed``.

    ``before`` is the work from the earlier positions and ``after`` from
    the later ones, both as the store tells it now (so the events written
    between are in both); ``passed`` is the group time the watermark in
    force over that read had passed (None: none). An event is counted
    below it when its bucket's time is: never fewer than the events that
    came out late.
    """
    earlier = [i for w in before for i in w.unread]
    later = [i for w in after for i in w.unread]
    read = max(0, _count(earlier) - _count(later))
    if passed is None:
        return run.plus(read, 0)
    below = _count(i for i in earlier if i.time < passed) - _count(
        i for i in later if i.time < passed
    )
    return run.plus(read, min(read, max(0, below)))


def _count(items: Iterable[TimeCount]) -> int:
    return sum(i.count for i in items)


def writers_percentile(work: Iterable[UnreadWork], p: float) -> int:
    """The group's writers' event time at percentile ``p``: END_OF_TIME when none is active.

    At most ``n - ceil(p * n)`` entries of all segments lie below it, ``n``
    the most writers one segment holds (see the module docstring): at
    least a fraction ``p`` of the writers lie after it in every segment.
    """
    segments = [[i for i in w.writers if i.count > 0] for w in work]
    most = max((sum(i.count for i in s) for s in segments), default=0)
    held = _time_below_at_most([i for s in segments for i in s], most - _needed(most, p))
    return END_OF_TIME if held is None else held
