"""The planner's tails (:mod:`connector.reader.tails`) against a real server over gRPC.

A plan over 1,024 idle segments costs the store one small ``DescribeTails``
call, to the tail or within a budget, and counting the lag none (the
server's request counters); an event, or a round of idle ticks, costs what
it changed. What the tails answer is the store's own answer: a plan from a
segment's tail is the store's plan there, and an advance within a budget
planned from the tails is the one planned segment by segment. Synthetic
clock, no idle advancer: nothing changes unless a test changes it. One
unit test, on scripted descriptions, shows how the cache merges them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.groups.lag import state_lag
from connector.model import SegmentTail, StreamTails
from connector.names import StreamId
from connector.reader.events import TimeDomain
from connector.reader.source import Budget, OptionNames, ReadSpec, SourcePlanner
from connector.reader.source.budget import advance_within
from connector.reader.source.cuts import StreamCut
from connector.reader.source.spec import StreamRead
from connector.reader.tails import TailCache, TailPlans
from connector.server import StoreServer
from tests.conftest import WIDE, new_stream_in
from tests.probes import CallCounter

LAG_MS = 5


@pytest.fixture
def store(start_store: Callable[..., StoreServer]) -> Iterator[tuple[StoreServer, StoreClient]]:
    """A server whose idle ticks come when a test calls for them (lag 0), and a client."""
    server = start_store(max_watermark_lag_ms=0)
    with StoreClient(server.uri, retry_timeout_s=5.0) as client:
        yield server, client


def planner_of(client: StoreClient, stream: str, task_events: int | None = None) -> SourcePlanner:
    """A planner of ``stream`` from its start, in ingestion time."""
    spec = ReadSpec.build(
        names=OptionNames(),
        uri="tidemark://127.0.0.1:1",  # the planner uses ``client``, not the spec's store
        streams=[StreamRead(stream, StreamCut.earliest(), None)],
        deserializer="json",
        time_domain=TimeDomain.INGESTION_TIME,
        max_event_time_lag_ms=LAG_MS,
        task_size=(task_events, None),
    )
    return SourcePlanner(client, spec)


def tick(server: StoreServer, clock: ManualClock) -> None:
    """Lets time pass and ticks every idle segment."""
    clock.advance(10)
    server.store.advance_idle_segments()


def test_plans_over_1024_idle_segments_cost_one_small_call_and_a_change_what_it_changed(
    store: tuple[StoreServer, StoreClient], clock: ManualClock
) -> None:
    server, client = store
    stream = new_stream_in(client, WIDE)
    planner = planner_of(client, stream)
    counted = CallCounter(server)
    begin = planner.start()
    counted.since()
    frontier = planner.next(begin)  # the first description is complete
    assert counted.since() == {"all": 1, "DescribeTails": 1}
    assert len(frontier.state.cursors) == WIDE

    budget = Budget(max_events=10)
    for _ in range(3):  # nothing changed: to the tail or within a budget, one small call each
        assert planner.next(frontier) == frontier
        assert planner.next(frontier, budget) == frontier
        assert counted.since() == {"all": 2, "DescribeTails": 2}
    assert planner.tails.lag(frontier.state).events == 0
    assert counted.since() == {}  # every segment at its tail: nothing to count

    client.append(f"{stream}/700", "w", 0, [b'{"n": 1}'])
    counted.since()
    assert planner.tails.refresh()[f"{stream}/700"].write_offset > 0
    assert planner.tails.lag(frontier.state).events == 1
    assert counted.since() == {"all": 2, "DescribeTails": 1, "PlanReads": 1}
    moved = planner.next(frontier, budget)
    assert counted.since() == {"all": 2, "DescribeTails": 1, "PlanReads": 1}
    assert [s for s, c in moved.state.cursors.items() if c != frontier.state.cursors[s]] == [
        f"{stream}/700"
    ]

    tick(server, clock)
    counted.since()
    risen = planner.next(moved, budget)
    assert counted.since() == {"all": 1, "DescribeTails": 1}
    assert all(
        c.watermark > moved.state.cursors[s].watermark for s, c in risen.state.cursors.items()
    )
    assert risen.rose_above(moved)


def test_a_plan_from_a_segments_tail_is_the_stores_own_plan_there(
    store: tuple[StoreServer, StoreClient], clock: ManualClock
) -> None:
    server, client = store
    stream = new_stream_in(client, 4)
    scope, name = stream.split("/")
    tick(server, clock)  # every segment ticked once, empty
    client.append(f"{stream}/1", "w", 0, [b"a", b"b"])
    client.assert_watermark(scope, name, "timed", 1, clock.now_ms() - 100)
    client.append(f"{stream}/2", "w", 0, [b"c"])
    tick(server, clock)
    StreamManager(client).split_segment(f"{stream}/3")  # sealed, with two successors
    tails = TailCache(client, [stream]).refresh()
    assert len(tails) == 6 and tails[f"{stream}/3"].sealed

    counted = CallCounter(server)
    plans = TailPlans(client, tails)
    told = {name: plans(name, tail.write_offset) for name, tail in tails.items()}
    assert counted.since() == {}
    assert told == {name: client.plan_read(name, tail.write_offset) for name, tail in tails.items()}
    assert told[f"{stream}/3"].end_of_segment and len(told[f"{stream}/3"].successors) == 2
    assert told[f"{stream}/0"].event_time_watermark is not None


def test_an_advance_planned_from_the_tails_is_the_one_planned_segment_by_segment(
    store: tuple[StoreServer, StoreClient], clock: ManualClock
) -> None:
    server, client = store
    stream = new_stream_in(client, 4)
    with EventWriter(client, stream, JsonSerializer()) as writer:
        for n in range(12):  # different amounts in different segments, 5 ms apart
            writer.write_event({"n": n}, routing_key=f"key-{n % 5}")
            writer.flush()
            clock.advance(5)
    planner = planner_of(client, stream, task_events=3)
    frontier = planner.start()
    tails = TailCache(client, [stream])
    time = planner.spec.time
    step = planner.spec.task_size
    budget = Budget(max_events=7)
    rounds = 0
    while rounds < 20:
        counted = CallCounter(server)
        asked, asked_pieces = advance_within(client, frontier, budget, time, step)
        by_segment = counted.since()["all"]
        tails.refresh()
        told, told_pieces = advance_within(client, frontier, budget, time, step, tails)
        from_tails = counted.since()["all"]
        assert (told, told_pieces) == (asked, asked_pieces)
        assert tails.lag(frontier.state) == state_lag(frontier.state, client.plan_read)
        assert from_tails <= by_segment
        if told == frontier:
            break
        frontier, rounds = told, rounds + 1
    assert 2 <= rounds < 20
    assert tails.lag(frontier.state).events == 0


def test_a_lag_counted_again_for_what_moved_is_the_lag_counted_whole(
    store: tuple[StoreServer, StoreClient], clock: ManualClock
) -> None:
    """After ticks and events, a state behind, one planned and one at the tail, in turn."""
    server, client = store
    stream = new_stream_in(client, 4)
    planner = planner_of(client, stream)
    behind = planned = planner.start()
    with EventWriter(client, stream, JsonSerializer()) as writer:
        for round_ in range(3):
            for n in range(round_ + 1):
                writer.write_event({"n": n}, routing_key=f"key-{n}")
            writer.flush()
            tick(server, clock)
            planned = planner.next(planned, Budget(max_events=2))
            for state in (behind.state, planned.state, planner.tail(planned).state):
                assert planner.tails.lag(state) == state_lag(state, client.plan_read)
    assert planner.tails.lag(planned.state).events > 0


def test_a_description_catches_a_scale_with_its_successors_and_the_tail_finishes_the_sealed(
    store: tuple[StoreServer, StoreClient],
) -> None:
    _, client = store
    stream = new_stream_in(client, 2)
    planner = planner_of(client, stream)
    before = planner.next(planner.start())
    StreamManager(client).split_segment(f"{stream}/0", into=3)
    after = planner.next(before)
    assert f"{stream}/0" in after.state.finished
    assert len(after.state.cursors) + len(after.state.waiting) == 4
    scope, name = StreamId.parse(stream).scope, StreamId.parse(stream).stream
    description = client.describe_stream(scope, name)
    open_segments = {s.segment for s in description.segments if not s.sealed}
    assert set(after.state.cursors) | set(after.state.waiting) == open_segments


class _ScriptedTails:
    """A client whose descriptions are scripted: a unit test of the cache's merging alone."""

    def __init__(self, *answers: StreamTails):
        self.answers = list(answers)
        self.asked: list[object] = []

    def describe_tails(self, streams: list[object], wait_ms: int = 0) -> list[StreamTails]:
        self.asked.append(streams[0])
        return [self.answers.pop(0)]


def _tail(number: int, sealed: bool = False, successors: tuple[str, ...] = ()) -> SegmentTail:
    return SegmentTail(
        segment=f"s/t/{number}",
        version=number,
        write_offset=10 * number,
        first_offset=0,
        watermark=100 + number,
        event_time_watermark=None,
        sealed=sealed,
        last_write_time=0,
        creation_time=0,
        key_low=0.0,
        key_high=1.0,
        epoch=0,
        successors=successors,
    )


def test_a_description_that_caught_a_seal_before_its_successors_is_asked_again_for_them() -> None:
    whole = StreamTails("s", "t", 7, 2, True, (_tail(0), _tail(1)))
    sealed = StreamTails("s", "t", 7, 3, False, (_tail(1, True, ("s/t/2", "s/t/3")),))
    successors = StreamTails("s", "t", 7, 5, False, (_tail(3), _tail(2)))
    client = _ScriptedTails(whole, sealed, successors)
    cache = TailCache(client, ["s/t"])  # type: ignore[arg-type]
    assert list(cache.refresh()) == ["s/t/0", "s/t/1"]
    tails = cache.refresh()
    assert list(tails) == ["s/t/0", "s/t/1", "s/t/2", "s/t/3"]  # in the order of their numbers
    assert tails["s/t/1"].sealed
    # Each call after the first gave back the version answered last, to learn what changed.
    assert client.asked[0] == "s/t"
    assert [(k.incarnation, k.version) for k in client.asked[1:]] == [(7, 2), (7, 3)]
