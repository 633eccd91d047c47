"""What a reader returns, and how it is configured."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar

from connector.errors import InvalidArgumentError
from connector.groups.percentile import check_percentile
from connector.timestamps import END_OF_TIME, IngestionTimeAssigner, TimestampAssigner, to_millis

__all__ = ["END_OF_TIME", "EventRead", "Position", "ReaderConfig", "TimeDomain", "to_millis"]

T = TypeVar("T")


class TimeDomain(enum.Enum):
    """Which clock a reader reports progress in (PDP 26, "Time Domain Configuration").

    ``PROCESSING_TIME`` (the default) never yields watermark reads, so code
    unaware of watermarks never mistakes one for an event. ``INGESTION_TIME``
    opts in: watermark reads appear between events, the store's ingestion
    clock less a lag. ``EVENT_TIME`` opts in to the event time the writers
    asserted (seed 002): the least assertion of the writers active at the
    group's position.
    """

    PROCESSING_TIME = "ProcessingTime"
    INGESTION_TIME = "IngestionTime"
    EVENT_TIME = "EventTime"

    @classmethod
    def parse(cls, text: str | TimeDomain) -> TimeDomain:
        """``"ProcessingTime"``, ``"IngestionTime"`` or ``"EventTime"`` (any case, ``_`` or not)."""
        if isinstance(text, TimeDomain):
            return text
        wanted = str(text).replace("_", "").lower()
        for domain in cls:
            if domain.value.lower() == wanted:
                return domain
        msg = f"unknown time domain {text!r}: use 'ProcessingTime', 'IngestionTime' or 'EventTime'"
        raise InvalidArgumentError(msg)


@dataclass(frozen=True)
class Position:
    """Where a read came from: the segment and the offset of the event."""

    segment: str
    offset: int


@dataclass(frozen=True)
class EventRead(Generic[T]):
    """One read: either an event or a watermark, never both.

    For an event: ``event`` is the deserialized value, ``event_time`` the time
    the timestamp assigner gave it, ``ingestion_time`` when the store took it,
    ``position`` where it is, ``routing_key`` the key it was written with,
    ``late`` whether its event time is at or below the last watermark this
    reader yielded (reported, never dropped).
    For a watermark: ``watermark`` (epoch ms) promises, in the ingestion-time
    domain, that every later event from this reader has an ingestion time
    above ``watermark + max_event_time_lag``; in the event-time domain, that
    every later event of a writer active where it was read has an event time
    above it, as long as its writer keeps its promise. Watermarks a reader
    yields strictly ascend.
    """

    event: T | None = None
    event_time: int | None = None
    ingestion_time: int | None = None
    position: Position | None = None
    routing_key: str | None = None
    watermark: int | None = None
    #: An event at or below the last watermark this reader yielded: reported, never dropped.
    late: bool = False

    @property
    def is_event(self) -> bool:
        """Whether this read carries an event."""
        return self.watermark is None

    @property
    def is_watermark(self) -> bool:
        """Whether this read carries a watermark."""
        return self.watermark is not None

    @classmethod
    def of_event(
        cls,
        event: T,
        event_time: int,
        ingestion_time: int,
        position: Position,
        routing_key: str | None = None,
        *,
        late: bool = False,
    ) -> EventRead[T]:
        """An event read; ``late`` when its event time is at or below the watermark in force."""
        return cls(event, event_time, ingestion_time, position, routing_key, late=late)

    @classmethod
    def of_watermark(cls, watermark: int) -> EventRead[Any]:
        """A watermark read."""
        return cls(watermark=watermark)


@dataclass(frozen=True)
class ReaderConfig:
    """How a reader reads.

    Attributes:
        time_domain: PROCESSING_TIME (no watermarks) or INGESTION_TIME.
        timestamp_assigner: gives each event its event time; by default the
            ingestion time.
        max_event_time_lag: subtracted from every group watermark before it is
            yielded (a timedelta or ms): the longest an event may take from
            happening to reaching the store. Not the server's
            ``--idle-tick-after-ms`` (``StoreConfig.max_watermark_lag_ms``),
            which is how long a segment must be idle before the store ticks
            its watermark forward.
        read_timeout: how long ``read_next_event`` waits for an event or a
            watermark when not told (timedelta or ms).
        watermark_percentile: the fraction of the group's work a watermark
            waits for, in (0, 1] (a domain with watermarks only). 1, the
            default, is the perfect watermark: nothing is late unless a
            writer breaks its promise. Below 1 the watermark passes the
            oldest ``1 - p`` of the work (a segment's backlog, a straggling
            writer) and their events come out late, flagged and counted
            (:attr:`EventReader.late_count`), never dropped; see
            :mod:`connector.groups.percentile`.
    """

    time_domain: TimeDomain = TimeDomain.PROCESSING_TIME
    timestamp_assigner: TimestampAssigner[Any] = field(default_factory=IngestionTimeAssigner)
    max_event_time_lag: int | timedelta = 0
    read_timeout: int | timedelta = 500
    watermark_percentile: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "time_domain", TimeDomain.parse(self.time_domain))
        object.__setattr__(
            self,
            "watermark_percentile",
            check_percentile(self.watermark_percentile, "watermark_percentile"),
        )
        object.__setattr__(
            self, "max_event_time_lag", to_millis("max_event_time_lag", self.max_event_time_lag)
        )
        object.__setattr__(self, "read_timeout", to_millis("read_timeout", self.read_timeout))

    @property
    def lag_ms(self) -> int:
        """``max_event_time_lag`` in milliseconds."""
        return int(self.max_event_time_lag)

    @property
    def read_timeout_ms(self) -> int:
        """``read_timeout`` in milliseconds."""
        return int(self.read_timeout)
