"""A reader group's progress in one vocabulary: its two watermarks, their delays, a diagnosis.

Seed 001 (Streaming Systems, chapter 3): the event-time watermark alone
cannot tell a pipeline processing hour-old data without delay from one
stuck for an hour on real-time data; the *processing-time watermark* (the
processing time of the oldest work not yet done) can. For a reader group:

- its **event-time watermark** is the time its readers yield as event
  time, before ``max_event_time_lag``: the writers' event time where writers
  assert one on its segments, else its ingestion watermark (in the
  ingestion-time domain ingestion time is the event time);
- its **processing-time watermark** is the ingestion time of its oldest
  unread event - 1 (every event ingested at or before it has been read),
  over every unfinished segment; a segment with nothing unread counts its
  own watermark (:attr:`connector.groups.lag.GroupLag.processing_time_watermark`);
- each watermark's **delay** is how far it is behind the store's clock.

Both delays small: healthy. Event-time delay large, processing-time delay
small: the data is old or buffered, the pipeline keeps up. Both large:
blocked or slow, or (with nothing unread) the store's watermark itself
stands still: ``tidemarkctl watermarks --why`` names what holds it.

One pure function (:func:`group_progress`) makes every figure from plain
values: the CLI, the server's metrics, Spark's offsets and Flink's metrics
all call it, so they agree. The names are those of ``docs/glossary.md``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connector.groups.lag import GroupLag
from connector.groups.state import NO_WRITER, GroupState
from connector.model import SegmentTail
from connector.timestamps import END_OF_TIME

__all__ = [
    "DEFAULT_LARGE_DELAY_MS",
    "Diagnosis",
    "GroupProgress",
    "delay_ms",
    "diagnose",
    "event_time_watermark",
    "group_progress",
    "writers_assert",
]

#: A delay above this is large (ms): above the store's default idle tick (10 s) and a poll or two.
DEFAULT_LARGE_DELAY_MS = 30_000


def writers_assert(state: GroupState, tails: Mapping[str, SegmentTail]) -> bool:
    """Whether a writer asserts event time now on any unfinished segment of a group at ``state``."""
    return any(
        tails[s].event_time_watermark is not None
        for s in (*state.cursors, *state.waiting)
        if s in tails
    )


class Diagnosis(enum.Enum):
    """What a group's two delays say, in the seed's words (the value is the metric label)."""

    HEALTHY = "healthy"
    DATA_OLD = "data_old_or_buffered"
    BLOCKED = "blocked_or_slow"
    STANDING_STILL = "watermark_stands_still"
    NOT_KNOWN = "not_known"

    @property
    def text(self) -> str:
        """The diagnosis for people."""
        return _TEXTS[self]


_TEXTS = {
    Diagnosis.HEALTHY: "healthy: both delays are small",
    Diagnosis.DATA_OLD: (
        "the data is old or buffered: the event-time delay is large, the processing-time "
        "delay small, so the pipeline keeps up"
    ),
    Diagnosis.BLOCKED: "blocked or slow: both delays are large and events wait unread",
    Diagnosis.STANDING_STILL: (
        "the watermark stands still: both delays are large with nothing unread "
        "(tidemarkctl watermarks --why names what holds it)"
    ),
    Diagnosis.NOT_KNOWN: "not known yet: a segment's event time is not known until it is read",
}


def delay_ms(now: int, watermark: int | None) -> int | None:
    """How far ``watermark`` is behind ``now`` (ms, >= 0); 0 at the end of time; None: unknown."""
    if watermark is None:
        return None
    if watermark >= END_OF_TIME:
        return 0
    return max(0, now - watermark)


def event_time_watermark(
    ingestion_watermark: int, writers_event_time: int | None, writers_assert: bool = True
) -> int | None:
    """The group's event-time watermark: the writers' where one holds, else the ingestion one.

    ``writers_event_time`` is :func:`~connector.groups.state.group_event_time`'s
    value (:data:`~connector.groups.state.NO_WRITER`: none holds; None: not
    known at a position not read yet). ``writers_assert``: whether any writer
    asserts event time on the group's segments now; when none does, a time
    not known is the ingestion watermark too (no writer can hold it).
    """
    if writers_event_time is None:
        return None if writers_assert else ingestion_watermark
    return ingestion_watermark if writers_event_time == NO_WRITER else writers_event_time


def diagnose(
    processing_delay_ms: int,
    event_delay_ms: int | None,
    unread_events: int,
    large_after_ms: int = DEFAULT_LARGE_DELAY_MS,
) -> Diagnosis:
    """The seed's reading of the two delays (a delay above ``large_after_ms`` is large)."""
    if event_delay_ms is None:
        return Diagnosis.NOT_KNOWN
    if processing_delay_ms <= large_after_ms:
        return Diagnosis.HEALTHY if event_delay_ms <= large_after_ms else Diagnosis.DATA_OLD
    return Diagnosis.BLOCKED if unread_events else Diagnosis.STANDING_STILL


@dataclass(frozen=True)
class GroupProgress:
    """A group's figures at the store's time ``now`` (epoch ms); see the module docstring.

    Watermarks are epoch ms (END_OF_TIME: nothing left to read; the event
    time None: not known yet), delays ms behind ``now``.
    """

    now: int
    unread_events: int
    processing_time_watermark: int
    processing_time_delay_ms: int
    event_time_watermark: int | None
    event_time_delay_ms: int | None
    diagnosis: Diagnosis

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (the diagnosis by its label)."""
        return {
            "unread_events": self.unread_events,
            "processing_time_watermark": self.processing_time_watermark,
            "processing_time_delay_ms": self.processing_time_delay_ms,
            "event_time_watermark": self.event_time_watermark,
            "event_time_delay_ms": self.event_time_delay_ms,
            "diagnosis": self.diagnosis.value,
        }


def group_progress(
    lag: GroupLag,
    ingestion_watermark: int,
    writers_event_time: int | None,
    now: int,
    large_after_ms: int = DEFAULT_LARGE_DELAY_MS,
    writers_assert: bool = True,
) -> GroupProgress:
    """The figures of a group whose unread events ``lag`` counts, at the store's time ``now``.

    ``ingestion_watermark`` and ``writers_event_time`` are the group's
    (:func:`~connector.groups.state.group_watermark`,
    :func:`~connector.groups.state.group_event_time`); ``writers_assert``
    as for :func:`event_time_watermark`.
    """
    processing = lag.processing_time_watermark
    processing_delay = delay_ms(now, processing)
    assert processing_delay is not None
    event = event_time_watermark(ingestion_watermark, writers_event_time, writers_assert)
    event_delay = delay_ms(now, event)
    return GroupProgress(
        now=now,
        unread_events=lag.events,
        processing_time_watermark=processing,
        processing_time_delay_ms=processing_delay,
        event_time_watermark=event,
        event_time_delay_ms=event_delay,
        diagnosis=diagnose(processing_delay, event_delay, lag.events, large_after_ms),
    )
