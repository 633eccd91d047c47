"""A planner's percentile watermark over a run: the counts ride in its frontiers, through restores.

A real server on a synthetic clock: a backlog on one segment, planned a
batch of one event at a time (as a Spark query with a small
``maxEventsPerTrigger`` or Flink's splits would), each batch read under
the watermark the batch before it ended with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from connector.client import StoreClient, StreamManager
from connector.clock import ManualClock
from connector.framing import iter_frames
from connector.groups.percentile import NO_RUN
from connector.reader.events import TimeDomain
from connector.reader.source import (
    Budget,
    Frontier,
    OptionNames,
    ReadSpec,
    SourcePlanner,
    StreamCut,
    StreamRead,
    read_range,
)
from connector.reader.source.ranges import ranges_between
from tests.conftest import new_stream_in

BACKLOG = 40


@pytest.fixture
def store(start_store: Callable[..., Any]) -> Iterator[StoreClient]:
    server = start_store(max_watermark_lag_ms=0)
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("pct")
        yield client


def _planner(client: StoreClient, stream: str, percentile: float) -> SourcePlanner:
    spec = ReadSpec.build(
        names=OptionNames(),
        uri="tidemark://127.0.0.1:1",  # the planner uses ``client``, not the spec's store
        streams=[StreamRead(stream, StreamCut.of("earliest"), None)],
        deserializer="json",
        time_domain=TimeDomain.INGESTION_TIME,
        max_event_time_lag_ms=0,
        watermark_percentile=percentile,
    )
    return SourcePlanner(client, spec)


def _backlog(client: StoreClient, clock: ManualClock) -> str:
    stream = new_stream_in(client, 2, scope="pct")
    for n in range(BACKLOG):
        clock.advance(10)
        client.append(f"{stream}/0", "backlog", n, [b"{}"])
    clock.advance(10)
    client.append(f"{stream}/1", "fresh", 0, [b"{}"])
    return stream


def _late_in(client: StoreClient, begin: Frontier, end: Frontier) -> tuple[int, int]:
    """Events between the frontiers and how many are at or below ``begin``'s watermark."""
    events = late = 0
    for segment_range in ranges_between(begin, end):
        for result in read_range(client, segment_range, chunk_bytes=64):
            for frame in iter_frames(result.data, result.offset):
                events += 1
                late += begin.watermark is not None and frame.ingestion_time <= begin.watermark
    return events, late


def _plan(
    client: StoreClient, stream: str, start: Frontier, batches: int, restore: bool = False
) -> list[Frontier]:
    """``batches`` batches of one event; with ``restore`` each from a new planner and JSON."""
    frontiers = [start]
    planner = _planner(client, stream, 0.9)
    for _ in range(batches):
        previous = frontiers[-1]
        if restore:
            planner = _planner(client, stream, 0.9)
            previous = Frontier.from_json(previous.to_json())
        frontiers.append(planner.next(previous, Budget(max_events=1)))
    return frontiers


def test_batches_of_a_backlog_come_out_late_within_one_minus_p_over_the_run(
    store: StoreClient, clock: ManualClock
) -> None:
    stream = _backlog(store, clock)
    start = _planner(store, stream, 0.9).start()
    frontiers = _plan(store, stream, start, BACKLOG + 1)
    counted = [_late_in(store, a, b) for a, b in zip(frontiers, frontiers[1:], strict=False)]
    events = sum(e for e, _ in counted)
    late = sum(n for _, n in counted)
    assert events == BACKLOG + 1
    assert 1 <= late <= 0.1 * events  # the per-batch rule of before made 20 of 41 late
    # The frontier carries what it counted: every event read, never fewer late than came out.
    assert frontiers[-1].run.read == events
    assert frontiers[-1].run.late >= late
    marks = [f.watermark for f in frontiers if f.watermark is not None]
    assert all(a <= b for a, b in zip(marks, marks[1:], strict=False))


def test_the_counts_survive_a_restore_from_the_frontier(
    store: StoreClient, clock: ManualClock
) -> None:
    stream = _backlog(store, clock)
    start = _planner(store, stream, 0.9).start()
    assert start.run == NO_RUN and "run" not in start.to_dict()  # the older form, unchanged
    kept = _plan(store, stream, start, 12)
    restored = _plan(store, stream, start, 12, restore=True)
    assert [f.watermark for f in restored] == [f.watermark for f in kept]
    assert [f.run for f in restored] == [f.run for f in kept]
    assert kept[-1].run.read == 12
