"""How a read keeps time: the time domain as a value, and the rules of rise and lateness.

Every time rule of the reader core is here, once (bytewax's ``Clock`` /
``ClockLogic``: time keeping is configuration, lateness is decided in one
place):

- :class:`TimeKeeping` says what watermark a group state carries: none in
  the processing-time domain (:class:`ProcessingTime`), the group
  watermark less the lag in the ingestion-time domain
  (:class:`IngestionTime`), the writers' group event time in the
  event-time domain (:class:`EventTime`); :meth:`TimeKeeping.advanced` is
  the one place a frontier's watermark is computed, and it never steps back;
- :func:`rose` says whether a watermark rose above the last one;
- :func:`is_late` says whether an event is late under a watermark.

The initial watermark of a segment (its creation time - 1) is a rule the
store shares, so it lives below both: :func:`connector.model.initial_watermark`.

The event-time domain (watermarks asserted by writers, seed 002) is one
more subclass whose :attr:`~TimeKeeping.group_time` is those, with the
same group rule (:mod:`~connector.groups.state`) and the same rise
and lateness rules as the others: planners, readers and both engines ask
only :class:`TimeKeeping` (a reader that keeps the group's time as its
positions move asks :meth:`TimeKeeping.watermark_of` of it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from connector.errors import InvalidArgumentError
from connector.groups.percentile import (
    NO_RUN,
    PERFECT,
    RunCounts,
    check_percentile,
    ingestion_percentile,
    writers_percentile,
)
from connector.groups.state import (
    INGESTION_WATERMARK,
    NO_WRITER,
    WRITERS_EVENT_TIME,
    GroupState,
    GroupTime,
)
from connector.model import UnreadWork
from connector.reader.events import TimeDomain
from connector.timestamps import END_OF_TIME, IngestionTimeAssigner, TimestampAssigner

__all__ = ["EventTime", "IngestionTime", "ProcessingTime", "TimeKeeping", "is_late", "rose"]

_Times = TypeVar("_Times")


def rose(watermark: int | None, last: int | None) -> bool:
    """Whether ``watermark`` is a rise over ``last``: set, and strictly above it (or no last)."""
    return watermark is not None and (last is None or watermark > last)


def is_late(event_time: _Times, watermark: int | None) -> _Times | bool:
    """Whether an event with ``event_time`` is late under ``watermark``: at or below it.

    Nothing is late under no watermark. ``event_time`` may be an array
    (numpy, pandas): the answer is then one per element.
    """
    if watermark is None:
        return False
    return event_time <= watermark  # type: ignore[operator,no-any-return]


@dataclass(frozen=True)
class TimeKeeping(ABC):
    """A read's time domain as a value: its timestamp assigner and its watermark rule.

    Attributes:
        assigner: gives each event its event time (by default, its ingestion time).
    """

    assigner: TimestampAssigner[Any] = field(default_factory=IngestionTimeAssigner)
    domain: ClassVar[TimeDomain]
    #: Whether this domain yields watermarks at all.
    has_watermarks: ClassVar[bool]

    #: Which of its segments' times the group's watermark is made of (None: no watermarks).
    group_time: ClassVar[GroupTime | None]

    def watermark(
        self,
        state: GroupState,
        fresher: Mapping[str, int | None] | None = None,
        work: Collection[UnreadWork] | None = None,
        run: RunCounts = NO_RUN,
    ) -> int | None:
        """The event-time watermark of a group at ``state``, or None (none now).

        ``fresher`` maps readable segments to newer values than the state's
        (a reader's own positions), each what :meth:`kept` keeps of one.
        ``work`` is what the store says of every unfinished segment's work
        from the group's position and ``run`` what the run did so far (see
        :meth:`percentile_watermark`). Not yet checked to rise.
        """
        if self.group_time is None:
            return None
        done = state.is_done
        perfect = self.watermark_of(self.group_time.least(state, fresher), done)
        return self.higher(perfect, self.percentile_watermark(work, done, run))

    @property
    def percentile(self) -> float:
        """The fraction of the group's work the watermark waits for (1: all, the perfect one)."""
        return PERFECT

    def percentile_watermark(
        self,
        work: Collection[UnreadWork] | None,
        done: bool,
        run: RunCounts = NO_RUN,
        counted: Collection[UnreadWork] | None = None,
    ) -> int | None:
        """The watermark at :attr:`percentile` over the group's ``work`` alone, or None.

        ``work``: the store's :class:`~connector.model.UnreadWork` of every
        unfinished segment from the group's position
        (:func:`connector.reader.unread_work.group_work`). ``run``: what the
        run read so far and how much of it came out late, and ``counted``
        the part of ``work`` the run reads (default all), for the
        ingestion-time rule's bound over the run
        (:func:`~connector.groups.percentile.ingestion_percentile`). None at
        percentile 1 (the perfect watermark is the rule), without work, or
        when the domain has no such time now. Not yet checked to rise;
        :meth:`higher` combines it with the perfect one.
        """
        if work is None or self.percentile == PERFECT:
            return None
        return self.watermark_of(self._group_time_at_percentile(work, run, counted), done)

    def group_time_passed(self, watermark: int | None) -> int | None:
        """The group time a watermark of this domain had passed (its lag added back), or None."""
        return None

    @staticmethod
    def higher(perfect: int | None, at_percentile: int | None) -> int | None:
        """The watermark given the perfect one and the one at the percentile.

        Never below ``perfect``; ``perfect`` while either is None (a time
        not known yet holds the group back at no known time).
        """
        if perfect is None or at_percentile is None:
            return perfect
        return max(perfect, at_percentile)

    def _group_time_at_percentile(
        self,
        work: Collection[UnreadWork],
        run: RunCounts,
        counted: Collection[UnreadWork] | None,
    ) -> int | None:
        """The group's time at :attr:`percentile` over ``work`` (the domain's rule)."""
        return None

    @abstractmethod
    def watermark_of(self, group_time: int | None, done: bool) -> int | None:
        """The watermark of a group whose :attr:`group_time` is ``group_time``, or None.

        ``done``: whether the group has read everything. :meth:`watermark`
        is this of the group's time at a state; a reader that keeps the
        group's time itself (:class:`~connector.groups.tracking.GroupTimeTracker`)
        asks this directly. Not yet checked to rise.
        """

    def kept(self, watermark: int, event_time: int | None) -> int | None:
        """Which of a segment position's two times this domain's watermark is made of.

        ``watermark`` is the segment's ingestion watermark there,
        ``event_time`` its writers' event time (see
        :class:`~connector.groups.state.SegmentCursor`).
        """
        return watermark

    @property
    def lag_ms(self) -> int | None:
        """How far event time may trail the watermark's clock, or None without watermarks."""
        return None

    @property
    def event_time_is_ingestion_time(self) -> bool:
        """Whether event time is the ingestion time: events need not be parsed for it."""
        return isinstance(self.assigner, IngestionTimeAssigner)

    def advanced(
        self,
        state: GroupState,
        last: int | None,
        fresher: Mapping[str, int | None] | None = None,
        work: Collection[UnreadWork] | None = None,
        run: RunCounts = NO_RUN,
    ) -> int | None:
        """The watermark a frontier at ``state`` carries after one that carried ``last``.

        The group's watermark (at the percentile, given ``work`` and
        ``run``) when it rose above ``last``, else ``last``: it never steps
        back. None in a domain without watermarks.
        """
        watermark = self.watermark(state, fresher, work, run)
        return watermark if rose(watermark, last) else last

    def emitted(
        self,
        state: GroupState,
        last: int | None,
        fresher: Mapping[str, int | None] | None = None,
    ) -> int | None:
        """The watermark to yield now after ``last``, or None when it would not rise."""
        watermark = self.watermark(state, fresher)
        return watermark if rose(watermark, last) else None

    @staticmethod
    def of(
        domain: TimeDomain | str,
        assigner: TimestampAssigner[Any] | None = None,
        lag_ms: int | None = None,
        percentile: float = PERFECT,
    ) -> TimeKeeping:
        """The time keeping of ``domain``, with ``assigner`` and, with watermarks, ``lag_ms``.

        ``percentile`` (in (0, 1]) is the fraction of the group's work its
        watermarks wait for (see :mod:`connector.groups.percentile`).

        Raises:
            InvalidArgumentError: a lag or a percentile below 1 for a domain
                without watermarks, a negative lag, a percentile outside
                (0, 1], naming it; the event-time domain without an
                assigner (it compares the events' own times with the writers').
        """
        percentile = check_percentile(percentile)
        domain = TimeDomain.parse(domain)
        if domain is TimeDomain.EVENT_TIME and (
            assigner is None or isinstance(assigner, IngestionTimeAssigner)
        ):
            msg = (
                "the event-time domain compares each event's own time with what its writer "
                f"asserted: give a timestamp assigner (got {assigner!r})"
            )
            raise InvalidArgumentError(msg)
        assigner = assigner if assigner is not None else IngestionTimeAssigner()
        if domain is TimeDomain.INGESTION_TIME:
            return IngestionTime(assigner, 0 if lag_ms is None else lag_ms, percentile)
        if domain is TimeDomain.EVENT_TIME:
            return EventTime(assigner, 0 if lag_ms is None else lag_ms, percentile)
        if percentile != PERFECT:
            msg = (
                f"a watermark percentile of {percentile!r} needs a domain with watermarks: "
                f"{domain.value!r} has none"
            )
            raise InvalidArgumentError(msg)
        if lag_ms:
            msg = (
                f"a lag of {lag_ms!r} ms needs a domain with watermarks: {domain.value!r} has none"
            )
            raise InvalidArgumentError(msg)
        return ProcessingTime(assigner)


@dataclass(frozen=True)
class ProcessingTime(TimeKeeping):
    """The processing-time domain (the default): no watermarks, so nothing is late."""

    domain: ClassVar[TimeDomain] = TimeDomain.PROCESSING_TIME
    has_watermarks: ClassVar[bool] = False
    group_time: ClassVar[GroupTime | None] = None

    def watermark_of(self, group_time: int | None, done: bool) -> None:
        """None: this domain has no watermarks."""
        return None


@dataclass(frozen=True)
class _Lagged(TimeKeeping):
    """A domain with watermarks, less a lag.

    Attributes:
        max_event_time_lag_ms: how far event time may trail the watermark's
            clock (ms, >= 0). Not the store's ``--idle-tick-after-ms``,
            which is how long a segment is idle before the store ticks its
            watermark.
        watermark_percentile: the fraction of the group's work the
            watermark waits for, in (0, 1]; 1 (the default) is the perfect
            watermark (see :mod:`connector.groups.percentile`).
    """

    max_event_time_lag_ms: int = 0
    watermark_percentile: float = PERFECT
    has_watermarks: ClassVar[bool] = True

    def __post_init__(self) -> None:
        lag = self.max_event_time_lag_ms
        if isinstance(lag, bool) or not isinstance(lag, int) or lag < 0:
            msg = f"max_event_time_lag must be milliseconds >= 0, got {lag!r}"
            raise InvalidArgumentError(msg)
        check_percentile(self.watermark_percentile)

    @property
    def percentile(self) -> float:
        """``watermark_percentile``."""
        return self.watermark_percentile

    @property
    def lag_ms(self) -> int:
        """``max_event_time_lag_ms``."""
        return self.max_event_time_lag_ms

    def _less_lag(self, group: int) -> int:
        return group if group == END_OF_TIME else group - self.max_event_time_lag_ms


@dataclass(frozen=True)
class IngestionTime(_Lagged):
    """The ingestion-time domain: the group watermark less ``max_event_time_lag``."""

    domain: ClassVar[TimeDomain] = TimeDomain.INGESTION_TIME
    group_time: ClassVar[GroupTime | None] = INGESTION_WATERMARK

    def watermark_of(self, group_time: int | None, done: bool) -> int:
        """The group watermark less the lag; END_OF_TIME once the group is done."""
        assert group_time is not None  # every segment has an ingestion watermark
        return self._less_lag(group_time)

    def _group_time_at_percentile(
        self,
        work: Collection[UnreadWork],
        run: RunCounts,
        counted: Collection[UnreadWork] | None,
    ) -> int:
        """The :func:`~connector.groups.percentile.ingestion_percentile` over the run."""
        return ingestion_percentile(work, self.watermark_percentile, run, counted)

    def group_time_passed(self, watermark: int | None) -> int | None:
        """The group time ``watermark`` had passed: the lag added back."""
        if watermark is None or watermark == END_OF_TIME:
            return watermark
        return watermark + self.max_event_time_lag_ms


@dataclass(frozen=True)
class EventTime(_Lagged):
    """The event-time domain: the event time the writers asserted (seed 002), for the group.

    The least over every unfinished segment of its writers' event time at
    the group's position there (:func:`~connector.groups.state.group_event_time`);
    a segment no active writer holds holds nobody back. The watermark
    promises that no later event of a writer active at that position has an
    event time at or below it, as long as the writers keep their promises;
    an event that breaks one is late (:func:`is_late`), flagged and
    reported, never dropped. No lag is subtracted unless given (for writers
    that assert optimistically).
    """

    domain: ClassVar[TimeDomain] = TimeDomain.EVENT_TIME
    group_time: ClassVar[GroupTime | None] = WRITERS_EVENT_TIME

    def kept(self, watermark: int, event_time: int | None) -> int | None:
        """The writers' event time: the event-time domain's watermark is made of those."""
        return event_time

    def watermark_of(self, group_time: int | None, done: bool) -> int | None:
        """The group's writers' event time less the lag; END_OF_TIME once the group is done.

        None while a segment's event time is not known (not read since it
        was placed), or while no writer holds any: no watermark then.
        """
        if group_time is None:
            return None
        if done:
            return END_OF_TIME
        return None if group_time == NO_WRITER else self._less_lag(group_time)

    def _group_time_at_percentile(
        self,
        work: Collection[UnreadWork],
        run: RunCounts,
        counted: Collection[UnreadWork] | None,
    ) -> int:
        """The active writers' :func:`~connector.groups.percentile.writers_percentile`."""
        return writers_percentile(work, self.watermark_percentile)
