"""The coordinator's epochs and the readers' tasks, against a real store server (no Flink).

The coordinator plans each epoch with the reader core (``SourcePlanner.step``)
and sends its tasks, then an :class:`EpochEnd`; a reader reads a task with the
core's ``read_columns`` and hands the JVM its events as batch rows.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from pyflink.common import Row

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.errors import InvalidArgumentError
from connector.reader.source import (
    EventColumns,
    Frontier,
    ReadTask,
    SegmentRange,
    SourcePlanner,
    read_columns,
)
from flink_adapter import FlinkTidemarkReader, TimeDomain
from flink_adapter.epochs import EpochEnd, epoch_records
from flink_adapter.reading import batch_rows
from flink_adapter.rows import BATCH_ROW_FIELDS

LAG = 1_000


def _store(start_store, segments=2):
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("e")
    StreamManager(client).create_stream("e", "s", segments)
    return server, client


def _planner(client: StoreClient, lag: int | None = LAG, **builder: Any) -> SourcePlanner:
    """The coordinator's planner: the builder's spec (JSON events timed by ``ts``)."""
    options = (
        FlinkTidemarkReader.builder()
        .with_store("tidemark://127.0.0.1:1")  # the planner uses ``client``
        .for_stream("e/s")
        .with_deserialization_schema("json")
    )
    if lag is not None:
        options = (
            options.with_time_domain(TimeDomain.INGESTION_TIME)
            .with_timestamp_assigner("ts")
            .with_max_event_time_lag(lag)
        )
    for name, value in builder.items():
        options = getattr(options, name)(*value)
    return SourcePlanner(client, options.build(check_store=False).settings.spec)


def _epoch(
    planner: SourcePlanner, previous: Frontier, epoch: int
) -> tuple[Frontier, list[ReadTask], EpochEnd]:
    step = planner.step(previous)
    *tasks, end = epoch_records(epoch, previous, step)
    return step.frontier, tasks, end


def test_epochs_plan_tasks_then_an_end_whose_watermark_only_rises(start_store, clock):
    server, client = _store(start_store)
    planner = _planner(client, with_epoch_budget=(4, None))
    frontier = planner.start()
    with EventWriter(client, "e/s", JsonSerializer()) as writer:
        for n in range(6):
            writer.write_event({"n": n, "ts": clock.now_ms()}, routing_key=f"k{n}")
    marks = []
    for epoch in range(1, 6):
        following, tasks, end = _epoch(planner, frontier, epoch)
        assert end.epoch == epoch
        assert all(task.watermark_in_force == frontier.watermark for task in tasks)
        if end.watermark is not None:
            marks.append(end.watermark)
        frontier = following
        clock.advance(400)
        server.store.advance_idle_segments()
    assert marks == sorted(set(marks)) and len(marks) >= 2, marks
    assert not _epoch(planner, frontier, 6)[1], "nothing more to read"
    client.close()


def test_idle_segments_move_the_epoch_watermark(start_store, clock):
    server, client = _store(start_store)
    planner = _planner(client)
    first, _, _ = _epoch(planner, planner.start(), 1)
    clock.advance(5_000)
    server.store.advance_idle_segments()
    _, tasks, end = _epoch(planner, first, 2)
    assert not tasks
    assert end.watermark is not None
    assert end.watermark > (first.watermark or 0)
    client.close()


def test_the_processing_time_domain_plans_no_watermark(start_store, clock):
    server, client = _store(start_store)
    planner = _planner(client, lag=None)
    clock.advance(5_000)
    server.store.advance_idle_segments()
    assert _epoch(planner, planner.start(), 1)[2].watermark is None
    client.close()


def test_records_are_typed_values_that_round_trip_through_pickle():
    ranges = (SegmentRange("e/s/0", 0, 120), SegmentRange("e/s/2", 0, 40))
    task = ReadTask(1, ranges, 1_700_000_000_000)
    assert pickle.loads(pickle.dumps(task)) == task
    assert pickle.loads(pickle.dumps(EpochEnd(3, None))) == EpochEnd(3, None)


def test_a_task_flags_events_at_or_below_the_watermark_in_force_late(start_store, clock):
    server, client = _store(start_store, segments=1)
    now = clock.now_ms()
    with EventWriter(client, "e/s", JsonSerializer()) as writer:
        for ts in (now - 10, now, now + 10):
            writer.write_event({"ts": ts}, routing_key="k")
    end = client.segment_info("e/s/0").write_offset
    task = ReadTask(0, (SegmentRange("e/s/0", 0, end),), now)
    spec = _planner(client).spec
    (columns,) = read_columns(client, task, spec.time, spec.deserializer)
    assert [t - now for t in columns.event_times] == [-10, 0, 10]
    assert columns.late == [True, True, False]
    (row,) = (_fields(row) for row in batch_rows(columns, as_text=True))
    assert row["late"] == [True, True, False]
    on_time = ReadTask(0, (SegmentRange("e/s/0", 0, end),), now - 11)
    (columns,) = read_columns(client, on_time, spec.time, spec.deserializer)
    (row,) = (_fields(row) for row in batch_rows(columns, as_text=True))
    assert row["late"] == [], "a batch without late events carries an empty late array"
    client.close()


@pytest.mark.parametrize("remembered", [False, True], ids=["described-each-time", "known"])
def test_a_segment_goes_to_the_same_reader_in_every_epoch_and_its_successors_follow(
    start_store, clock, remembered
):
    """Also with one planner for every epoch (it keeps the segments' descriptions)."""
    server, client = _store(start_store)
    kept = _planner(client)
    frontier = kept.start()
    first, second = [s.segment for s in client.describe_stream("e", "s").segments]
    written: dict[str, int] = {}

    def lanes_after(segments: list[str], epoch: int) -> dict[str, int]:
        """Appends two events to each of ``segments``; the lane of each task planned next."""
        nonlocal frontier
        for segment in segments:
            client.append(segment, f"w-{segment}", written.get(segment, 0), [b"a", b"b"])
            written[segment] = written.get(segment, 0) + 2
        planner = kept if remembered else _planner(client)
        frontier, tasks, _ = _epoch(planner, frontier, epoch)
        return {task.ranges[0].segment: task.lane for task in tasks}

    both = lanes_after([first, second], 1)
    assert both[first] % 2 != both[second] % 2, "two segments, two readers"
    assert lanes_after([second], 2) == {second: both[second]}, "not moved to the first reader"
    assert lanes_after([first], 3) == {first: both[first]}
    successors = client.scale_stream("e", "s", [1], split_count=2).segments
    successor = next(s.segment for s in successors if second in s.predecessors)
    assert lanes_after([successor], 4) == {successor: both[second]}, "a successor follows"
    client.close()


def test_an_epoch_cuts_each_segment_into_tasks_of_at_most_so_many_events_in_read_order(
    start_store, clock, monkeypatch
):
    """The budget measures in steps of the task size: the tasks are those steps, no more asked."""
    server, client = _store(start_store, segments=1)
    planner = _planner(client, with_read_task_size=(3, None))
    frontier = planner.start()
    with EventWriter(client, "e/s", JsonSerializer()) as writer:
        for n in range(7):
            writer.write_event({"n": n, "ts": clock.now_ms()}, routing_key="k")
    asked: list[int] = []  # the offset of every plan asked, alone or in a batch
    plan_read, plan_reads = StoreClient.plan_read, StoreClient.plan_reads

    def counting(self: StoreClient, segment: str, offset: int, *args: Any, **kwargs: Any) -> Any:
        asked.append(offset)
        return plan_read(self, segment, offset, *args, **kwargs)

    def counting_each(self: StoreClient, plans: Any) -> Any:
        asked.extend(plan.offset for plan in plans)
        return plan_reads(self, plans)

    monkeypatch.setattr(StoreClient, "plan_read", counting)
    monkeypatch.setattr(StoreClient, "plan_reads", counting_each)
    _, tasks, _ = _epoch(planner, frontier, 1)
    monkeypatch.undo()
    spec = planner.spec
    read = [
        [json.loads(p)["n"] for c in read_columns(client, t, spec.time, "json") for p in c.payloads]
        for t in tasks
    ]
    assert read == [[0, 1, 2], [3, 4, 5], [6]]
    assert len({task.lane for task in tasks}) == 1, "one segment, one lane"
    assert len(asked) == 3, "one plan per task, measured once: splitting asked nothing more"
    client.close()


def _fields(row: Row) -> dict[str, Any]:
    """A reader row's values by field name."""
    return dict(zip(BATCH_ROW_FIELDS, row, strict=True))


def _columns(segment: str, sizes: list[int]) -> EventColumns:
    n = len(sizes)
    return EventColumns(
        segment, list(range(n)), [0] * n, [None] * n, [b"x" * s for s in sizes], list(range(n))
    )


def test_batches_hold_one_segments_events_within_their_limits_and_keep_the_order():
    rows = list(batch_rows(_columns("a", [10] * 5), False, max_events=2, max_bytes=40))
    rows += batch_rows(_columns("b", [50, 10]), False, max_events=2, max_bytes=40)
    assert [(_fields(row)["segment"], _fields(row)["offset"]) for row in rows] == [
        ("a", [0, 1]),
        ("a", [2, 3]),
        ("a", [4]),
        ("b", [0]),
        ("b", [1]),
    ]
    assert list(batch_rows(_columns("c", []), False)) == []


def test_a_batch_leaves_out_the_arrays_the_jvm_can_take_from_elsewhere():
    shared = EventColumns("s", [0, 10, 20], [5, 5, 5], ["k"] * 3, [b"{}"] * 3, [5, 5, 5])
    (row,) = (_fields(row) for row in batch_rows(shared, as_text=True))
    assert (row["ingested"], row["ingestion_time"], row["event_time"]) == (5, [], [])
    assert row["event"] == ["{}"] * 3 and row["offset"] == [0, 10, 20]
    timed = EventColumns("s", [0, 10, 20], [5, 5, 6], ["k"] * 3, [b"{}"] * 3, [1, 2, 3])
    (row,) = (_fields(row) for row in batch_rows(timed, as_text=True))
    assert (row["ingested"], row["ingestion_time"], row["event_time"]) == (
        None,
        [5, 5, 6],
        [1, 2, 3],
    )


def test_a_text_schema_names_an_event_that_is_not_utf8():
    columns = EventColumns("e/s/0", [0, 40], [5, 5], [None] * 2, [b"{}", b"\xff"], [5, 5])
    with pytest.raises(InvalidArgumentError, match="offset 40 of segment e/s/0 is not UTF-8"):
        list(batch_rows(columns, as_text=True))
    assert len(list(batch_rows(columns, as_text=False))) == 1
