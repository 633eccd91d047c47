"""How far time has progressed on a stream's segments and in reader groups: plain values.

Every figure is named as in the glossary (``docs/glossary.md``) and made by
the same pure functions as the server's metrics and the engines' figures
(:mod:`connector.groups.progress`, :mod:`connector.groups.stall`). The
store is asked in a fixed number of calls, whatever the number of
segments: the tails of every stream in one ``DescribeTails``, each group's
unread events in one ``PlanReads``; only segments whose writers assert
event time are asked for their writers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from connector.client import StoreClient
from connector.errors import TidemarkError
from connector.groups.lag import GroupLag
from connector.groups.progress import (
    DEFAULT_LARGE_DELAY_MS,
    GroupProgress,
    delay_ms,
)
from connector.groups.record import GroupRecord
from connector.groups.stall import Stall, StoreTiming
from connector.groups.state import group_watermark
from connector.model import SegmentTail
from connector.names import StreamId
from connector.reader.group import ReaderGroupManager
from connector.reader.progress_watch import look_at, stall_of, stream_tails
from connector.reader.progress_watch import store_now as server_now

__all__ = [
    "GroupView",
    "GroupWatermark",
    "SegmentWatermark",
    "WatermarkReport",
    "group_view",
    "server_now",
    "stream_tails",
    "watermarks",
]


@dataclass(frozen=True)
class SegmentWatermark:
    """One segment: its watermark, its delay behind the store's clock, and whether idle.

    ``idle``: no write (and no idle tick) for ``idle_after_ms`` or more.
    ``event_time_watermark`` is the one its writers asserted (None: no
    active writer holds it), ``event_time_delay_ms`` how far that is behind
    the store's clock, and ``writers`` how many writers hold it.
    """

    segment: str
    watermark: int
    delay_ms: int
    idle: bool
    sealed: bool
    last_write_time: int
    write_offset: int
    event_time_watermark: int | None = None
    event_time_delay_ms: int | None = None
    writers: int = 0


@dataclass(frozen=True)
class GroupWatermark:
    """A reader group: its watermarks and their delays, the diagnosis, and what holds it.

    ``watermark`` is the group's ingestion watermark and ``delay_ms`` its
    delay; ``progress`` has the processing-time and event-time watermarks,
    their delays, the unread events and the diagnosis
    (:class:`~connector.groups.progress.GroupProgress`); ``holding_back``,
    ``reader`` and ``reason`` say what holds the ingestion watermark
    (:func:`~connector.groups.stall.why`).
    """

    group: str
    watermark: int
    delay_ms: int
    holding_back: str | None
    reader: str | None
    reason: str
    progress: GroupProgress

    @property
    def event_time_watermark(self) -> int | None:
        """The group's event-time watermark (None: not known yet)."""
        return self.progress.event_time_watermark

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values, the progress's figures beside the others."""
        value = asdict(self)
        del value["progress"]
        return {**value, **self.progress.to_dict()}


@dataclass(frozen=True)
class WatermarkReport:
    """A stream's segments and the given groups, at the store's time ``now``.

    ``event_time_watermark`` is the least its writers asserted over its open
    segments (None while no writer is active).
    """

    stream: str
    now: int
    segments: tuple[SegmentWatermark, ...]
    groups: tuple[GroupWatermark, ...]
    event_time_watermark: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-able values."""
        return {
            "stream": self.stream,
            "now": self.now,
            "segments": [asdict(s) for s in self.segments],
            "groups": [g.to_dict() for g in self.groups],
            "event_time_watermark": self.event_time_watermark,
        }


@dataclass(frozen=True)
class GroupView:
    """A group as the CLI shows it: its record, unread events, figures and what holds it."""

    name: str
    record: GroupRecord
    lag: GroupLag
    progress: GroupProgress
    stall: Stall


def group_view(
    client: StoreClient,
    scope: str,
    group: str,
    now: int,
    tails: Mapping[str, SegmentTail] | None = None,
    timing: StoreTiming = StoreTiming(),  # noqa: B008 (a frozen value)
    large_after_ms: int = DEFAULT_LARGE_DELAY_MS,
) -> GroupView:
    """Group ``scope/group`` at the store's time ``now``, asked of the store in a few calls.

    ``tails``: its segments' tails when known (else one ``DescribeTails``);
    its unread events: one ``PlanReads``; the writers of the segment at its
    event-time minimum: one ``GetSegmentInfo``.

    Raises:
        NotFoundError: the group does not exist.
    """
    record = ReaderGroupManager(client).get_reader_group(scope, group).record()
    if tails is None:
        tails = stream_tails(client, record.streams)
    look = look_at(client, record.state, tails, now, large_after_ms, record.assignments)
    stall = stall_of(client, f"{scope}/{group}", record, look.lag, tails, timing, now)
    return GroupView(f"{scope}/{group}", record, look.lag, look.progress, stall)


def _segment_order(segment: str) -> tuple[str, int]:
    head, _, number = segment.rpartition("/")
    return head, int(number) if number.isdigit() else 0


def watermarks(
    client: StoreClient,
    stream: StreamId,
    groups: Sequence[str] = (),
    idle_after_ms: int = 1_000,
    timing: StoreTiming = StoreTiming(),  # noqa: B008 (a frozen value)
    large_after_ms: int = DEFAULT_LARGE_DELAY_MS,
) -> WatermarkReport:
    """The watermark of every segment of ``stream`` and the figures of ``groups``.

    Groups are named ``scope/group`` or ``group`` (in the stream's scope).
    The store is asked in a fixed number of calls (see the module
    docstring), plus one per segment whose writers assert event time.

    Raises:
        NotFoundError: the stream or a group does not exist.
    """
    now = server_now(client, stream.scope)
    named = [
        (scope or stream.scope, group) for scope, _, group in (n.rpartition("/") for n in groups)
    ]
    manager = ReaderGroupManager(client)
    records = [manager.get_reader_group(scope, group).record() for scope, group in named]
    wanted = {str(stream), *(s for r in records for s in r.streams)}
    tails = stream_tails(client, wanted)
    own = sorted(
        (t for t in tails.values() if t.segment.startswith(f"{stream}/")),
        key=lambda t: _segment_order(t.segment),
    )
    segments = [_segment_watermark(client, t, now, idle_after_ms) for t in own]
    held_open = [
        s.event_time_watermark
        for s in segments
        if not s.sealed and s.event_time_watermark is not None
    ]
    reports = []
    for scope, group in named:
        view = group_view(client, scope, group, now, tails, timing, large_after_ms)
        mark = group_watermark(view.record.state)
        holder = view.stall.ingestion_time
        reports.append(
            GroupWatermark(
                group=view.name,
                watermark=mark,
                delay_ms=delay_ms(now, mark) or 0,
                holding_back=holder.segment,
                reader=holder.reader,
                reason=holder.text,
                progress=view.progress,
            )
        )
    return WatermarkReport(
        str(stream), now, tuple(segments), tuple(reports), min(held_open, default=None)
    )


def _segment_watermark(
    client: StoreClient, tail: SegmentTail, now: int, idle_after_ms: int
) -> SegmentWatermark:
    held = tail.event_time_watermark
    writers = 0
    if held is not None:  # only segments whose writers assert event time: their writers
        try:
            writers = len(client.segment_info(tail.segment).writers)
        except TidemarkError:
            writers = 0
    return SegmentWatermark(
        segment=tail.segment,
        watermark=tail.watermark,
        delay_ms=max(0, now - tail.watermark),
        idle=not tail.sealed and now - tail.last_write_time >= idle_after_ms,
        sealed=tail.sealed,
        last_write_time=tail.last_write_time,
        write_offset=tail.write_offset,
        event_time_watermark=held,
        event_time_delay_ms=delay_ms(now, held),
        writers=writers,
    )
