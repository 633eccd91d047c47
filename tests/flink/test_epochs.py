"""The coordinator's epochs and the readers' tasks, against a real store server (no Flink)."""

from __future__ import annotations

import json

import pytest

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.reader.lineage import KnownSegments
from connector.reader.planning import start_frontier
from connector.reader.timestamps import FieldTimestampAssigner
from flink_adapter.epochs import EpochEnd, ReadTask, decode_record, plan_epoch
from flink_adapter.reading import ReadEvent, batched, read_task

LAG = 1_000
_ASSIGNER = FieldTimestampAssigner("ts")


def _store(start_store, segments=2):
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("e")
    StreamManager(client).create_stream("e", "s", segments)
    return server, client


def test_epochs_plan_tasks_then_an_end_whose_watermark_only_rises(start_store, clock):
    server, client = _store(start_store)
    frontier = start_frontier(client, ["e/s"], "earliest", LAG)
    with EventWriter(client, "e/s", JsonSerializer()) as writer:
        for n in range(6):
            writer.write_event({"n": n, "ts": clock.now_ms()}, routing_key=f"k{n}")
    marks = []
    for epoch in range(1, 6):
        plan = plan_epoch(client, ["e/s"], frontier, epoch, LAG, max_events=4)
        assert all(task.epoch == epoch for task in plan.tasks)
        assert all(task.watermark_in_force == frontier.watermark for task in plan.tasks)
        if plan.end.watermark is not None:
            marks.append(plan.end.watermark)
        frontier = plan.frontier
        clock.advance(400)
        server.store.advance_idle_segments()
    assert marks == sorted(set(marks)) and len(marks) >= 2, marks
    assert not plan_epoch(client, ["e/s"], frontier, 6, LAG).events_planned
    client.close()


def test_idle_segments_move_the_epoch_watermark(start_store, clock):
    server, client = _store(start_store)
    frontier = start_frontier(client, ["e/s"], "earliest", LAG)
    first = plan_epoch(client, ["e/s"], frontier, 1, LAG)
    clock.advance(5_000)
    server.store.advance_idle_segments()
    second = plan_epoch(client, ["e/s"], first.frontier, 2, LAG)
    assert not second.events_planned
    assert second.end.watermark is not None
    assert second.end.watermark > (first.frontier.watermark or 0)
    client.close()


def test_the_processing_time_domain_plans_no_watermark(start_store, clock):
    server, client = _store(start_store)
    frontier = start_frontier(client, ["e/s"], "earliest", None)
    clock.advance(5_000)
    server.store.advance_idle_segments()
    assert plan_epoch(client, ["e/s"], frontier, 1, None).end.watermark is None
    client.close()


def test_records_round_trip_through_their_text():
    task = ReadTask(3, 1, (("e/s/0", 0, 120), ("e/s/2", 0, 40)), 1_700_000_000_000)
    assert decode_record(task.encode()) == task
    assert decode_record(EpochEnd(3, None).encode()) == EpochEnd(3, None)


def test_a_task_flags_events_at_or_below_the_watermark_in_force_late(start_store, clock):
    server, client = _store(start_store, segments=1)
    now = clock.now_ms()
    with EventWriter(client, "e/s", JsonSerializer()) as writer:
        for ts in (now - 10, now, now + 10):
            writer.write_event({"ts": ts}, routing_key="k")
    end = client.segment_info("e/s/0").write_offset
    task = ReadTask(1, 0, (("e/s/0", 0, end),), now)
    events = list(read_task(client, task, JsonSerializer(), FieldTimestampAssigner("ts"), True))
    assert [(e.event_time - now, e.late) for e in events] == [(-10, True), (0, True), (10, False)]
    assert all(isinstance(e.event, str) for e in events)
    client.close()


@pytest.mark.parametrize("remembered", [False, True], ids=["described-each-time", "known"])
def test_a_segment_goes_to_the_same_reader_in_every_epoch_and_its_successors_follow(
    start_store, clock, remembered
):
    """Also with the segments' descriptions kept from epoch to epoch, as the coordinator does."""
    known = KnownSegments() if remembered else None
    server, client = _store(start_store)
    frontier = start_frontier(client, ["e/s"], "earliest", LAG)
    first, second = [s.segment for s in client.describe_stream("e", "s").segments]
    written: dict[str, int] = {}

    def lanes_after(segments: list[str], epoch: int) -> dict[str, int]:
        """Appends two events to each of ``segments``; the lane of each task planned next."""
        nonlocal frontier
        for segment in segments:
            client.append(segment, f"w-{segment}", written.get(segment, 0), [b"a", b"b"])
            written[segment] = written.get(segment, 0) + 2
        plan = plan_epoch(client, ["e/s"], frontier, epoch, LAG, known=known)
        frontier = plan.frontier
        return {task.ranges[0][0]: task.index for task in plan.tasks}

    both = lanes_after([first, second], 1)
    assert both[first] % 2 != both[second] % 2, "two segments, two readers"
    assert lanes_after([second], 2) == {second: both[second]}, "not moved to the first reader"
    assert lanes_after([first], 3) == {first: both[first]}
    successors = client.scale_stream("e", "s", [1], split_count=2).segments
    successor = next(s.segment for s in successors if second in s.predecessors)
    assert lanes_after([successor], 4) == {successor: both[second]}, "a successor follows"
    client.close()


def test_an_epoch_cuts_each_segment_into_tasks_of_at_most_so_many_events_in_read_order(
    start_store, clock
):
    server, client = _store(start_store, segments=1)
    frontier = start_frontier(client, ["e/s"], "earliest", LAG)
    with EventWriter(client, "e/s", JsonSerializer()) as writer:
        for n in range(7):
            writer.write_event({"n": n, "ts": clock.now_ms()}, routing_key="k")
    plan = plan_epoch(client, ["e/s"], frontier, 1, LAG, max_task_events=3)
    read = [
        [json.loads(e.event)["n"] for e in read_task(client, t, JsonSerializer(), _ASSIGNER, True)]
        for t in plan.tasks
    ]
    assert read == [[0, 1, 2], [3, 4, 5], [6]]
    assert len({task.index for task in plan.tasks}) == 1, "one segment, one lane"
    client.close()


def _event(segment: str, n: int, size: int = 10) -> ReadEvent:
    return ReadEvent(None, n, n, False, n, n, segment, size)


def test_batches_hold_one_segments_events_within_their_limits_and_keep_the_order():
    events = [_event("a", n) for n in range(5)] + [_event("b", 5, size=50), _event("b", 6)]
    batches = list(batched(events, max_events=2, max_bytes=40))
    assert [[e.event for e in batch] for batch in batches] == [[0, 1], [2, 3], [4], [5], [6]]
    assert list(batched([])) == []
