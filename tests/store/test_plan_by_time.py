"""A read plan that stops before a time: where a read by ingestion time starts, on every storage.

A plan also says when its first event was ingested (a reader's oldest
unread event, for its processing-time watermark).

``plan_read(..., before_time=t)`` stops before the first event ingested at
or after ``t``: checked against a walk over the frames, through a real gRPC
server on a synthetic clock, for appends of many sizes, idle ticks between
them, a budget of events, a truncated head and a sealed segment.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from connector.client import StoreClient, StreamManager
from connector.clock import ManualClock
from connector.errors import InvalidArgumentError
from connector.framing import Frame, iter_frames
from tests.conftest import new_stream_in

pytestmark = pytest.mark.storages("file", "jetstream")


def _frames(client: StoreClient, segment: str) -> list[Frame]:
    end = client.segment_info(segment).write_offset
    offset, frames = client.segment_info(segment).first_offset, []
    while offset < end:
        result = client.read(segment, offset, max_bytes=end - offset)
        frames += iter_frames(result.data, result.offset)
        offset = result.next_offset
    return frames


def _fill(client: StoreClient, server: Any, clock: ManualClock, segment: str, seed: int) -> None:
    """Appends of 1 to 60 events of 0 to 3,000 bytes, the clock moving, idle ticks between."""
    rng = random.Random(seed)
    number = 0
    for _ in range(30):
        count = rng.choice((1, 2, 7, 60))
        client.append(
            segment, "w", number, [rng.randbytes(rng.choice((0, 10, 3_000))) for _ in range(count)]
        )
        number += count
        clock.advance(rng.choice((1, 5, 20)))
        if rng.random() < 0.3:
            server.store.advance_idle_segments()
            clock.advance(5)


def _expected(
    frames: list[Frame], start: int, time_ms: int, max_events: int | None
) -> tuple[int, int]:
    taken = []
    for frame in (f for f in frames if f.offset >= start):
        if frame.ingestion_time >= time_ms or (max_events is not None and len(taken) >= max_events):
            break
        taken.append(frame)
    return (taken[-1].end if taken else start), len(taken)


@pytest.mark.parametrize("seed", range(2))
def test_a_plan_stops_before_the_first_event_ingested_at_or_after_the_time(
    start_store: Callable[..., Any], clock: ManualClock, seed: int
) -> None:
    server = start_store(max_watermark_lag_ms=0)
    with StoreClient(server.uri) as client:
        segment = f"{new_stream_in(client)}/0"
        created = client.segment_info(segment).creation_time
        clock.advance(10)
        _fill(client, server, clock, segment, seed)
        frames = _frames(client, segment)
        times = sorted({f.ingestion_time for f in frames})
        probes = {created - 1, created, times[-1] + 1, clock.now_ms() + 1_000}
        probes |= {t + d for t in times for d in (-1, 0, 1)}
        starts = [0, *(f.offset for f in frames[:: max(1, len(frames) // 7)])]
        ingested_at = {f.offset: f.ingestion_time for f in frames}
        for time_ms in sorted(probes):
            for start in starts:
                for max_events in (None, 3):
                    plan = client.plan_read(segment, start, max_events, before_time=time_ms)
                    expected = _expected(frames, start, time_ms, max_events)
                    assert (plan.next_offset, plan.events) == expected, (time_ms, start, max_events)
                    assert plan.at_tail == (plan.next_offset == frames[-1].end)
                    # When the first planned event was ingested: a reader's oldest unread one.
                    first = ingested_at[start] if plan.events else None
                    assert plan.first_ingestion_time == first, (time_ms, start, max_events)
        # No event of a plan's stop on is at or before time - 1: the watermark there may say so.
        plan = client.plan_read(segment, 0, before_time=times[len(times) // 2])
        assert all(
            f.ingestion_time >= times[len(times) // 2]
            for f in frames
            if f.offset >= plan.next_offset
        )


def test_a_plan_by_time_from_a_truncated_head_and_of_a_sealed_segment(
    start_store: Callable[..., Any], clock: ManualClock
) -> None:
    server = start_store(max_watermark_lag_ms=0)
    with StoreClient(server.uri) as client:
        stream = new_stream_in(client)
        segment = f"{stream}/0"
        for n in range(6):
            clock.advance(10)
            client.append(segment, "w", n, [f"e{n}".encode()])
        frames = _frames(client, segment)
        client.truncate_stream(*stream.split("/"), {0: frames[2].offset})
        first = client.plan_read(segment, frames[2].offset, before_time=frames[4].ingestion_time)
        assert (first.next_offset, first.events) == (frames[4].offset, 2)
        StreamManager(client).seal_stream(*stream.split("/"))
        everything = client.plan_read(segment, frames[2].offset, before_time=clock.now_ms() + 1)
        assert everything.end_of_segment and everything.events == 4
        with pytest.raises(InvalidArgumentError, match="before_time must be"):
            client.plan_read(segment, frames[2].offset, before_time=-5)
