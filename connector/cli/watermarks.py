"""How far time has progressed on a stream's segments and in reader groups: plain values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from connector.client import StoreClient
from connector.groups.record import GroupRecord
from connector.groups.state import NO_WRITER, group_event_time, group_watermark
from connector.names import StreamId
from connector.reader.group import ReaderGroupManager

__all__ = [
    "GroupWatermark",
    "SegmentWatermark",
    "WatermarkReport",
    "held_back_because",
    "server_now",
    "watermarks",
]


@dataclass(frozen=True)
class SegmentWatermark:
    """One segment: its watermark, how far that is behind the store's clock, and whether idle.

    ``idle``: no write (and no idle tick) for ``idle_after_ms`` or more.
    ``event_time_watermark`` is the one its writers asserted (None: no
    active writer holds it), ``event_time_lag_ms`` how far that is behind
    the store's clock, and ``writers`` how many writers hold it.
    """

    segment: str
    watermark: int
    lag_ms: int
    idle: bool
    sealed: bool
    last_write_time: int
    write_offset: int
    event_time_watermark: int | None = None
    event_time_lag_ms: int | None = None
    writers: int = 0


@dataclass(frozen=True)
class GroupWatermark:
    """A reader group: its watermark, the segment (and reader) holding it back, and why.

    ``event_time_watermark`` is the group's writers' event time (the
    event-time domain's watermark before it is yielded): None while a
    segment's is not known yet, or no writer holds any.
    """

    group: str
    watermark: int
    lag_ms: int
    holding_back: str | None
    reader: str | None
    reason: str = ""
    event_time_watermark: int | None = None


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
        return asdict(self)


def server_now(client: StoreClient, scope: str) -> int:
    """The store's ingestion clock now (epoch ms), as it stamps a state read."""
    return client.get_state(f"clock/{scope}/now").server_time


def watermarks(
    client: StoreClient,
    stream: StreamId,
    groups: Sequence[str] = (),
    idle_after_ms: int = 1_000,
) -> WatermarkReport:
    """The watermark of every segment of ``stream`` (oldest first) and of ``groups``.

    Groups are named ``scope/group`` or ``group`` (in the stream's scope).

    Raises:
        NotFoundError: the stream or a group does not exist.
    """
    description = client.describe_stream(stream.scope, stream.stream)
    now = server_now(client, stream.scope)
    segments = []
    for segment in description.segments:
        info = client.segment_info(segment.segment)
        held = info.event_time_watermark
        segments.append(
            SegmentWatermark(
                segment=info.segment,
                watermark=info.watermark,
                lag_ms=max(0, now - info.watermark),
                idle=not info.sealed and now - info.last_write_time >= idle_after_ms,
                sealed=info.sealed,
                last_write_time=info.last_write_time,
                write_offset=info.write_offset,
                event_time_watermark=held,
                event_time_lag_ms=None if held is None else max(0, now - held),
                writers=len(info.writers),
            )
        )
    held_open = [
        s.event_time_watermark
        for s in segments
        if not s.sealed and s.event_time_watermark is not None
    ]
    manager = ReaderGroupManager(client)
    reports = []
    for name in groups:
        scope, _, group = name.rpartition("/")
        record = manager.get_reader_group(scope or stream.scope, group).record()
        state = record.state
        mark = group_watermark(state)
        candidates = [(c.watermark, s) for s, c in state.cursors.items()]
        candidates += [(w.watermark, s) for s, w in state.waiting.items()]
        holding = min(candidates)[1] if candidates else None
        tail = client.segment_info(holding).watermark if holding in state.cursors else None
        reports.append(
            GroupWatermark(
                group=f"{scope or stream.scope}/{group}",
                watermark=mark,
                lag_ms=max(0, now - mark) if candidates else 0,
                holding_back=holding,
                reader=record.assignments.get(holding) if holding else None,
                reason=held_back_because(record, holding, tail),
                event_time_watermark=_held(group_event_time(state)),
            )
        )
    return WatermarkReport(
        str(stream), now, tuple(segments), tuple(reports), min(held_open, default=None)
    )


def _held(event_time: int | None) -> int | None:
    return None if event_time == NO_WRITER else event_time


def held_back_because(record: GroupRecord, holding: str | None, tail_watermark: int | None) -> str:
    """Why the segment ``holding`` (the lowest watermark) holds the group's watermark back.

    ``tail_watermark`` is that segment's own watermark at its tail, if it is
    being read. In words for people: no reader at all, nobody holds the
    segment, it waits for its predecessors, its reader is behind, or the
    segment itself has had neither a write nor an idle tick.
    """
    if holding is None:
        return "nothing left to read"
    waiting = record.state.waiting.get(holding)
    if waiting is not None:
        before = ", ".join(sorted(waiting.waiting_for))
        return f"{holding} waits for {before} to be read to the end"
    if not record.leases:
        return f"no readers: nobody reads {holding}"
    reader = record.assignments.get(holding)
    if reader is None:
        return f"no reader holds {holding}"
    cursor = record.state.cursors[holding]
    if tail_watermark is not None and cursor.watermark >= tail_watermark:
        return (
            f"{holding} itself: reader {reader} is at its tail, and neither a write nor an "
            "idle tick has moved the segment's watermark since"
        )
    return f"reader {reader} is behind on {holding}"
