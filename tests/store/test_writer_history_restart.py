"""Each writer's assertion history across a restart of a file store, on a server process.

A percentile over the writers (event-time domain) needs each active
writer's assertion at a reader's position, not just the least one. The
store keeps, per segment, each writer's recent changes by offset
(:mod:`connector.store.writer_history`), rebuilt from the journal at start:

- restarted from a journal of records, every change is replayed, so the
  writers at every past position are known exactly as before;
- restarted from a compacted journal (a snapshot of the live state), only
  the writers active at the snapshot's end are known, from that end on.
  At a position before it, each of them counts at the segment's event-time
  watermark there (the least assertion of the writers then active): the
  percentile there falls back to the perfect watermark, never above the
  truth. A reader past the snapshot's end gets exact answers again.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from connector.client import EventWriter, JsonSerializer, StoreClient
from connector.clock import ManualClock
from connector.groups.percentile import percentile_time
from connector.model import PlanRequest, TimeCount
from connector.server import StoreServer
from connector.store import SegmentStore, StoreConfig
from tests.conftest import ServerProcess

SEGMENT = "h/s/0"


def _writers_at(client: StoreClient, offset: int) -> tuple[TimeCount, ...]:
    (planned,) = client.plan_reads([PlanRequest(SEGMENT, offset, 1, None, None, 64)])
    assert not isinstance(planned, Exception), planned
    return planned.work.writers


def _both(uri: str, middle: int, tail: int) -> tuple[tuple[TimeCount, ...], ...]:
    with StoreClient(uri, retry_timeout_s=10.0) as client:
        return _writers_at(client, middle), _writers_at(client, tail)


def test_writers_survive_a_replayed_restart_exactly_and_a_compacted_one_down_to_the_least(
    start_store: Callable[..., StoreServer],
    spawn_server: Callable[..., ServerProcess],
    data_dir: pathlib.Path,
    clock: ManualClock,
) -> None:
    server = start_store()
    with StoreClient(server.uri) as client:
        client.create_scope("h")
        client.create_stream("h", "s", 1)
        writers = [
            EventWriter(client, "h/s", JsonSerializer(), writer_id=f"w{i}") for i in range(10)
        ]
        for second_round in (False, True):
            for i, writer in enumerate(writers):
                t = (1_000 if i == 0 else 60_000) + 1_000 * second_round
                writer.write_event({"t": t - 1})
                writer.note_time(t)
                writer.flush()
                clock.advance(1)
            if not second_round:
                middle = client.segment_info(SEGMENT).write_offset
        tail = client.segment_info(SEGMENT).write_offset
        before = (_writers_at(client, middle), _writers_at(client, tail))
    server.stop(grace_s=0.5)
    assert before == (
        (TimeCount(1_000, 1), TimeCount(60_000, 9)),
        (TimeCount(2_000, 1), TimeCount(61_000, 9)),
    )
    assert percentile_time(before[0], 0.9) == 60_000

    replayed = spawn_server(data_dir)
    assert _both(replayed.uri, middle, tail) == before, "every change replayed"
    replayed.process.terminate()
    assert replayed.process.wait(timeout=20) == 0, replayed.log()

    # A store opened with a low threshold compacts the journal at start: a snapshot at the tail.
    config = StoreConfig(
        str(data_dir), clock=clock, polling_period_ms=None, compact_after_records=5
    )
    with SegmentStore(config) as store:
        assert store.engine._journal.records < 5, "compacted"  # noqa: SLF001
    compacted = spawn_server(data_dir)
    at_middle, at_tail = _both(compacted.uri, middle, tail)
    assert at_tail == before[1], "from the snapshot's end on, exact"
    # Before it, the ten writers active at the end count at the least assertion there.
    assert at_middle == (TimeCount(1_000, 10),)
    assert percentile_time(at_middle, 0.9) == 1_000, "the perfect watermark there, not above"
