"""The core planner (:class:`SourcePlanner`) against a real store server on a synthetic clock.

Stream cuts, frontiers and their JSON form, advancing to the tail and
within event and byte budgets (oldest watermark first, oversize events
alone, successors after all their predecessors), ranges, lineage chains and
reading them, and the watermark of idle segments under a budget.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient, StreamManager, key_position
from connector.clock import ManualClock
from connector.errors import InvalidArgumentError
from connector.framing import iter_frames
from connector.names import StreamId
from connector.reader.events import TimeDomain
from connector.reader.source import (
    Budget,
    Frontier,
    FrontierForms,
    OptionNames,
    ReadSpec,
    SegmentRange,
    SourcePlanner,
    StreamCut,
    StreamRead,
    read_range,
)
from connector.reader.source.ranges import ranges_between, split_range
from connector.timestamps import END_OF_TIME
from tests.conftest import new_stream_in


def key_in(low: float, high: float) -> Iterator[str]:
    """Routing keys whose position lies in ``[low, high)``."""
    return (k for k in (f"key-{i}" for i in itertools.count()) if low <= key_position(k) < high)


@pytest.fixture
def store(start_store: Callable[..., Any]) -> Iterator[tuple[Any, StoreClient]]:
    """A server whose idle ticks come at once (lag 0) when a test calls for them."""
    server = start_store(max_watermark_lag_ms=0)
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("plan")
        yield server, client


def planner(
    client: StoreClient,
    stream: str | StreamId,
    lag_ms: int | None = 0,
    start: Any = "earliest",
    end: Any = None,
) -> SourcePlanner:
    """A planner of ``stream`` from ``start`` (to ``end``); ``lag_ms`` None: processing time."""
    spec = ReadSpec.build(
        names=OptionNames(),
        uri="tidemark://127.0.0.1:1",  # the planner uses ``client``, not the spec's store
        streams=[
            StreamRead(str(stream), StreamCut.of(start), None if end is None else StreamCut.of(end))
        ],
        deserializer="json",
        time_domain=TimeDomain.PROCESSING_TIME if lag_ms is None else TimeDomain.INGESTION_TIME,
        max_event_time_lag_ms=lag_ms,
    )
    return SourcePlanner(client, spec)


def start_frontier(
    client: StoreClient, stream: str | StreamId, start: Any, lag_ms: int | None
) -> Frontier:
    return planner(client, stream, lag_ms, start).start()


def advance_to_tail(
    client: StoreClient, stream: str | StreamId, previous: Frontier, lag_ms: int | None
) -> Frontier:
    return planner(client, stream, lag_ms).tail(previous)


def advance_within_budget(
    client: StoreClient, stream: str, previous: Frontier, lag_ms: int | None, **budget: int
) -> Frontier:
    return planner(client, stream, lag_ms).next(previous, Budget(**budget))


def lineage_chains(
    client: StoreClient, stream: str, start: Frontier, end: Frontier
) -> list[tuple[SegmentRange, ...]]:
    return [task.ranges for task in planner(client, stream).tasks(start, end)]


def write(
    client: StoreClient,
    stream: str,
    clock: ManualClock,
    keys: list[str],
    rounds: int,
    size: int = 0,
) -> list[tuple[str, int]]:
    """``rounds`` events per key, the clock moving 5 ms a round; returns (key, n) pairs."""
    written = []
    with EventWriter(client, stream, JsonSerializer()) as writer:
        for n in range(rounds):
            for key in keys:
                writer.write_event({"key": key, "n": n, "pad": "x" * size}, routing_key=key)
                written.append((key, n))
            writer.flush()
            clock.advance(5)
    return written


def events_in(client: StoreClient, ranges: list[SegmentRange]) -> list[tuple[str, int]]:
    serializer = JsonSerializer()
    found = []
    for segment_range in ranges:
        for result in read_range(client, segment_range, chunk_bytes=64):
            for frame in iter_frames(result.data, result.offset):
                event = serializer.deserialize(frame.payload)
                found.append((event["key"], event["n"]))
    return found


def plan_all(
    client: StoreClient, stream: str, start: Frontier, lag_ms: int | None = 0, **budget: int
) -> list[tuple[Frontier, Frontier]]:
    """Budgeted plans from ``start`` until one moves nothing; returns (from, to) pairs."""
    plans = []
    frontier = start
    for _ in range(1_000):
        following = advance_within_budget(client, stream, frontier, lag_ms, **budget)
        if not ranges_between(frontier, following) and following.state == frontier.state:
            return plans
        plans.append((frontier, following))
        frontier = following
    msg = "budgeted planning never settled"
    raise AssertionError(msg)


# --- start positions and frontiers --------------------------------------------------


def test_stream_cuts_come_from_factories_words_and_cuts() -> None:
    assert StreamCut.of("earliest") == StreamCut.of("head") == StreamCut.earliest()
    assert StreamCut.of("latest") == StreamCut.of("tail") == StreamCut.latest()
    cut = StreamCut.offsets({"a/b/1": 7, "a/b/0": 3})
    assert StreamCut.of({"a/b/0": 3, "a/b/1": 7}) == cut
    assert cut.as_dict() == {"a/b/0": 3, "a/b/1": 7}
    assert repr(StreamCut.latest()) == "StreamCut.latest()"
    for bad in ("newest", 3, {}, {"a/b": 1}, {"a/b/0": -1}, {"a/b/0": True}):
        with pytest.raises(InvalidArgumentError):
            StreamCut.of(bad)  # type: ignore[arg-type]


def test_a_frontier_round_trips_through_dicts_and_json_and_reads_the_older_form(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    stream = new_stream_in(client, 2, scope="plan")
    write(client, stream, clock, ["a", "b", "c"], rounds=2)
    frontier = advance_to_tail(client, stream, start_frontier(client, stream, "earliest", 5), 5)
    assert Frontier.from_dict(frontier.to_dict()) == frontier
    assert Frontier.from_json(frontier.to_json()) == frontier
    assert isinstance(frontier.to_dict()["state"], dict)  # nested values, not JSON in strings
    assert "columns" in frontier.to_dict()["state"]  # the compact form, a column per field
    nested = {"state": frontier.state.to_dict(), "ends": {}, "watermark": frontier.watermark}
    assert Frontier.from_dict(nested) == frontier  # the form of the releases before it
    older = {"state": frontier.state.to_json(), "ends": "{}", "watermark": frontier.watermark}
    assert Frontier.from_dict(older) == frontier
    no_watermark = {"state": frontier.state.to_json(), "ends": "{}", "watermark": -1}
    assert Frontier.from_dict(no_watermark).watermark is None
    with pytest.raises(InvalidArgumentError, match="invalid frontier"):
        Frontier.from_dict({"state": {}})


def test_frontier_forms_read_a_form_they_made_as_the_same_frontier_and_others_anew(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    stream = new_stream_in(client, 2, scope="plan")
    write(client, stream, clock, ["a", "b"], rounds=1)
    frontier = advance_to_tail(client, stream, start_frontier(client, stream, "earliest", 5), 5)
    forms = FrontierForms(size=2)
    offset = {"figures": 1, **forms.as_dict(frontier)}  # a host's value may hold more
    assert forms.as_dict(frontier) is forms.as_dict(frontier)  # made once
    handed_back = json.loads(json.dumps(offset))
    assert forms.from_dict(handed_back) is frontier
    assert forms.from_json(forms.as_json(frontier)) is frontier
    older = {"state": frontier.state.to_json(), "ends": "{}", "watermark": frontier.watermark}
    read = forms.from_dict(older)  # not made here: read anew, as Frontier.from_dict reads it
    assert read == frontier and read is not frontier
    moved = {**handed_back, "watermark": frontier.watermark + 1}
    assert forms.from_dict(moved).watermark == frontier.watermark + 1
    assert forms.from_dict(json.loads(json.dumps(offset))) is not frontier  # forgotten: size 2
    with pytest.raises(InvalidArgumentError, match="invalid frontier"):
        forms.from_dict({"state": {}})


def test_a_frontier_reads_as_another_when_only_watermarks_moved(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    server, client = store
    stream = new_stream_in(client, 2, scope="plan")
    write(client, stream, clock, ["a", "b"], rounds=1)
    plans = planner(client, stream, lag_ms=0)
    begin = plans.tail(plans.start())
    clock.advance(1_000)
    server.store.advance_idle_segments()
    ticked = plans.tail(begin)
    assert ticked.watermark is not None and ticked.rose_above(begin)
    assert begin.reads_as(ticked) and ticked.reads_as(begin)
    write(client, stream, clock, ["a"], rounds=1)
    assert not ticked.reads_as(plans.tail(ticked))  # an event
    scope, name = stream.split("/")
    StreamManager(client).split_segment(scope, name, 0)
    assert not ticked.reads_as(plans.tail(ticked))  # a seal and new segments


def test_start_frontiers_at_earliest_latest_and_a_cut(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    stream = new_stream_in(client, 2, scope="plan")
    write(client, stream, clock, ["a", "b", "c", "d"], rounds=3)
    earliest = start_frontier(client, stream, StreamCut.earliest(), None)
    latest = start_frontier(client, stream, StreamCut.latest(), None)
    assert {s: c.offset for s, c in earliest.state.cursors.items()} == {
        f"{stream}/0": 0,
        f"{stream}/1": 0,
    }
    tails = {f"{stream}/{n}": client.segment_info(f"{stream}/{n}").write_offset for n in (0, 1)}
    assert {s: c.offset for s, c in latest.state.cursors.items()} == tails
    assert earliest.watermark is None  # processing time: no watermark

    [(segment, offset)] = [(f"{stream}/0", tails[f"{stream}/0"])]
    cut = start_frontier(client, stream, StreamCut.offsets({segment: offset}), 0)
    assert {s: c.offset for s, c in cut.state.cursors.items()} == {segment: offset}
    with pytest.raises(InvalidArgumentError, match="not in streams"):
        start_frontier(client, stream, {"plan/other/0": 0}, 0)


def test_advancing_to_the_tail_covers_every_event_once_and_its_watermark_trails_by_the_lag(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    stream = new_stream_in(client, 3, scope="plan")
    keys = [f"k{i}" for i in range(6)]
    start = start_frontier(client, stream, "earliest", 10)
    written = write(client, stream, clock, keys, rounds=4)
    end = advance_to_tail(client, stream, start, 10)
    assert Counter(events_in(client, ranges_between(start, end))) == Counter(written)
    tail_watermarks = [client.segment_info(s).watermark for s in end.state.cursors]
    assert end.watermark == min(tail_watermarks) - 10
    assert advance_to_tail(client, stream, end, 10).watermark == end.watermark  # never back


# --- budgets --------------------------------------------------------------------------


def test_an_event_budget_goes_to_the_oldest_watermark_first_and_every_event_is_planned_once(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    stream = new_stream_in(client, 2, scope="plan")
    old_key, young_key = next(key_in(0, 0.5)), next(key_in(0.5, 1))
    written = write(client, stream, clock, [old_key], rounds=4)  # segment 0: older events
    written += write(client, stream, clock, [young_key], rounds=4)  # segment 1: younger
    start = start_frontier(client, stream, "earliest", 0)
    # Both start at creation time - 1 and segment 0 sorts first; after 3 of its events its
    # watermark is above segment 1's, which goes next; then segment 0's last event is oldest.
    plans = plan_all(client, stream, start, max_events=3)
    batches = [events_in(client, ranges_between(a, b)) for a, b in plans]
    assert [len(b) for b in batches] == [3, 3, 2]
    assert Counter(e for b in batches for e in b) == Counter(written)
    assert {k for k, _ in batches[0]} == {old_key}
    assert batches[1][0][0] == young_key
    watermarks = [b.watermark for _, b in plans]
    assert all(x is not None for x in watermarks)
    assert watermarks == sorted(watermarks)


def test_a_byte_budget_plans_whole_events_and_an_oversize_event_alone(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    stream = new_stream_in(client, 1, scope="plan")
    key = "k"
    written = write(client, stream, clock, [key], rounds=3, size=10)
    written += write(client, stream, clock, [key], rounds=1, size=500)
    written += write(client, stream, clock, [key], rounds=2, size=10)
    segment = f"{stream}/0"
    frames = list(iter_frames(client.read(segment, 0, max_bytes=1 << 20).data))
    small = frames[0].end - frames[0].offset
    big = max(f.end - f.offset for f in frames)
    budget = 2 * small + small // 2  # two small events fit, the big one does not
    assert big > budget
    start = start_frontier(client, stream, "earliest", 0)
    plans = plan_all(client, stream, start, max_bytes=budget)
    sizes = [sum(r.stop - r.start for r in ranges_between(a, b)) for a, b in plans]
    assert sizes == [2 * small, small, big, 2 * small]
    assert Counter(events_in(client, [r for a, b in plans for r in ranges_between(a, b)])) == (
        Counter(written)
    )


def test_idle_segments_watermarks_advance_under_a_budget(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    """Once writers stop, idle ticks must reach the frontier, or event time freezes."""
    server, client = store
    stream = new_stream_in(client, 2, scope="plan")
    write(client, stream, clock, [next(key_in(0, 0.5)), next(key_in(0.5, 1))], rounds=3)
    start = start_frontier(client, stream, "earliest", 0)
    read_all = advance_within_budget(client, stream, start, 0, max_events=100)
    assert len(events_in(client, ranges_between(start, read_all))) == 6
    clock.advance(1_000)
    assert server.store.advance_idle_segments() == 2
    ticked = min(client.segment_info(s).watermark for s in read_all.state.cursors)
    assert ticked >= clock.now_ms() - 1

    for budget in ({"max_events": 1}, {"max_bytes": 1}):
        idle = advance_within_budget(client, stream, read_all, 0, **budget)
        assert ranges_between(read_all, idle) == []
        assert idle.watermark == ticked, budget


def test_an_idle_segment_advances_while_another_uses_up_the_budget(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    server, client = store
    stream = new_stream_in(client, 2, scope="plan")
    busy, quiet = next(key_in(0, 0.5)), next(key_in(0.5, 1))
    write(client, stream, clock, [busy, quiet], rounds=1)
    frontier = advance_within_budget(
        client, stream, start_frontier(client, stream, "earliest", 0), 0, max_events=10
    )
    clock.advance(100)
    server.store.advance_idle_segments()
    write(client, stream, clock, [busy], rounds=5)  # segment 0 busy again, segment 1 idle
    after = advance_within_budget(client, stream, frontier, 0, max_events=2)
    quiet_segment = f"{stream}/1"
    assert (
        after.state.cursors[quiet_segment].watermark == client.segment_info(quiet_segment).watermark
    )
    assert after.state.cursors[quiet_segment].watermark > (
        frontier.state.cursors[quiet_segment].watermark
    )


# --- successors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "budget",
    [{"max_events": 5}, {"max_bytes": 200}, {"max_events": 3, "max_bytes": 150}],
    ids=["events", "bytes", "both"],
)
def test_budgeted_plans_read_successors_only_after_all_their_predecessors(
    store: tuple[Any, StoreClient], clock: ManualClock, budget: dict[str, int]
) -> None:
    _, client = store
    manager = StreamManager(client)
    stream = new_stream_in(client, 2, scope="plan")
    scope, name = stream.split("/")
    keys = [next(key_in(i / 8, (i + 1) / 8)) for i in range(8)]
    start = start_frontier(client, stream, "earliest", 0)
    written = write(client, stream, clock, keys, rounds=2)
    manager.split_segment(scope, name, 0)  # 2 [0, .25) and 3 [.25, .5)
    written += write(client, stream, clock, keys, rounds=2, size=0)
    manager.merge_segments(scope, name, [3, 1])  # 4 [.25, 1): waits for 3 and 1
    clock.advance(5)
    more = write(client, stream, clock, keys, rounds=2)

    plans = plan_all(client, stream, start, **budget)
    seen: list[str] = []
    description = client.describe_stream(scope, name)
    for before, after in plans:
        ranges = ranges_between(before, after)
        for segment_range in ranges:
            # Read in this plan only if every predecessor is finished by its end.
            predecessors = description.segment(segment_range.segment).predecessors
            assert set(predecessors) <= after.state.finished, segment_range
            seen.append(segment_range.segment)
        events = events_in(client, ranges)
        assert len(events) <= budget.get("max_events", len(events))
        size = sum(r.stop - r.start for r in ranges)
        assert len(events) == 1 or size <= budget.get("max_bytes", size), (events, size)
    assert Counter(events_in(client, [r for a, b in plans for r in ranges_between(a, b)])) == (
        Counter(written + more)
    )
    assert {s.rsplit("/", 1)[1] for s in seen} == {"0", "1", "2", "3", "4"}
    last = plans[-1][1]
    assert set(last.state.cursors) == {f"{stream}/2", f"{stream}/4"}
    # Per routing key, events come in the order written across the whole plan.
    order = events_in(client, [r for a, b in plans for r in ranges_between(a, b)])
    for key in keys:
        ns = [n for k, n in order if k == key]
        assert ns == [0, 1, 0, 1, 0, 1], (key, ns)


def test_lineage_chains_put_successors_after_their_predecessors_in_one_chain(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    manager = StreamManager(client)
    stream = new_stream_in(client, 3, scope="plan")
    scope, name = stream.split("/")
    keys = [next(key_in(i / 6, (i + 1) / 6)) for i in range(6)]
    start = start_frontier(client, stream, "earliest", 0)
    write(client, stream, clock, keys, rounds=1)
    manager.merge_segments(scope, name, [0, 1])  # 3 follows 0 and 1; 2 is unrelated
    write(client, stream, clock, keys, rounds=1)
    end = advance_to_tail(client, stream, start, 0)
    chains = lineage_chains(client, stream, start, end)
    assert [[r.segment.rsplit("/", 1)[1] for r in chain] for chain in chains] == [
        ["0", "1", "3"],
        ["2"],
    ]
    assert lineage_chains(client, stream, end, end) == []


def test_split_range_cuts_whole_events_within_its_limits_and_covers_the_range(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    stream = new_stream_in(client, 1, scope="plan")
    key = next(key_in(0, 1))
    written = write(client, stream, clock, [key], rounds=7)
    write(client, stream, clock, [key], rounds=1, size=500)  # one event larger than 256 bytes
    start = start_frontier(client, stream, "earliest", 0)
    (whole,) = ranges_between(start, advance_to_tail(client, stream, start, 0))

    by_events = split_range(client, whole, Budget(max_events=3))
    by_bytes = split_range(client, whole, Budget(max_bytes=256))

    for pieces in (by_events, by_bytes):
        assert pieces[0].start == whole.start and pieces[-1].stop == whole.stop
        assert all(a.stop == b.start for a, b in zip(pieces, pieces[1:], strict=False))
        assert events_in(client, pieces) == [*written, (key, 0)]
    assert [len(events_in(client, [p])) for p in by_events] == [3, 3, 2]
    assert all(p.stop - p.start <= 256 for p in by_bytes[:-1])
    assert (
        by_bytes[-1].stop - by_bytes[-1].start > 500 and len(events_in(client, by_bytes[-1:])) == 1
    )
    assert split_range(client, whole, Budget()) == [whole]
    with pytest.raises(
        InvalidArgumentError, match="max_events must be an integer >= 1 or None, got 0"
    ):
        split_range(client, whole, Budget(max_events=0))


def test_a_frontier_at_a_cut_ends_where_the_cut_is_and_reads_its_ancestors_whole(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    _, client = store
    manager = StreamManager(client)
    stream = new_stream_in(client, 1, scope="plan")
    scope, name = stream.split("/")
    start = start_frontier(client, stream, "earliest", 0)
    before = write(client, stream, clock, ["a", "b"], rounds=2)
    manager.split_segment(scope, name, 0)
    write(client, stream, clock, ["a", "b"], rounds=2)
    cut = {f"{stream}/1": 0, f"{stream}/2": 0}
    end = planner(client, stream, 0, end=cut).end(start)
    assert Counter(events_in(client, ranges_between(start, end))) == Counter(before)
    assert end.watermark is not None and end.watermark < END_OF_TIME


class _StaleDescriptions:
    """A client whose first ``describe_stream`` answers with ``stale``; everything else is real."""

    def __init__(self, client: StoreClient, stale: Any):
        self._client = client
        self._stale: list[Any] = [stale]

    def describe_stream(self, scope: str, stream: str) -> Any:
        if self._stale:
            return self._stale.pop()
        return self._client.describe_stream(scope, stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_advancing_to_the_tail_includes_successors_of_a_segment_split_while_it_plans(
    start_store: Callable[..., Any], clock: ManualClock
) -> None:
    """Without the successors, the group watermark would pass an event not yet read.

    A wrapper client replays a description taken before a split, as if the
    split came between the planner's two calls to the store.
    """
    server = start_store(max_watermark_lag_ms=0)
    with StoreClient(server.uri) as client:
        manager = StreamManager(client)
        manager.create_scope("plan")
        manager.create_stream("plan", "events", segment_count=2)
        stream = StreamId.parse("plan/events")
        start = start_frontier(client, stream, "earliest", 0)
        stale = client.describe_stream("plan", "events")  # segments 0 and 1, both open
        clock.advance(100)
        manager.split_segment("plan", "events", 0)  # successors 2 and 3
        clock.advance(100)
        with EventWriter(client, stream, JsonSerializer()) as writer:
            writer.write_event({"n": 1}, routing_key="k7")  # key position 0.148: segment 2
        [event] = iter_frames(client.read("plan/events/2", 0).data, 0)
        clock.advance(500)
        server.store.advance_idle_segments()  # segment 1's watermark is now past the event

        end = advance_to_tail(_StaleDescriptions(client, stale), stream, start, 0)  # type: ignore[arg-type]

        assert set(end.state.cursors) == {"plan/events/1", "plan/events/2", "plan/events/3"}
        assert end.state.finished == {"plan/events/0"}
        ranges = {r.segment: (r.start, r.stop) for r in ranges_between(start, end)}
        assert ranges == {"plan/events/2": (0, event.end)}  # the event is in this batch
        assert end.watermark is not None and end.watermark >= event.ingestion_time


def test_a_budgeted_plan_reads_no_event_back(store, clock, monkeypatch) -> None:
    """The store counts the events of each share (PlanRead); the planner reads none."""
    _, client = store
    stream = new_stream_in(client, 2, scope="plan")
    written = write(client, stream, clock, ["a", "b", "c", "d"], 200)
    reads: list[str] = []
    plan_calls: list[str] = []
    read, plan_read = StoreClient.read, StoreClient.plan_read

    def counting_read(self: StoreClient, segment: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(segment)
        return read(self, segment, *args, **kwargs)

    def counting_plan(self: StoreClient, segment: str, *args: Any, **kwargs: Any) -> Any:
        plan_calls.append(segment)
        return plan_read(self, segment, *args, **kwargs)

    monkeypatch.setattr(StoreClient, "read", counting_read)
    monkeypatch.setattr(StoreClient, "plan_read", counting_plan)
    start = start_frontier(client, stream, "earliest", 0)
    plans = plan_all(client, stream, start, max_events=150)
    assert reads == []
    assert plan_calls
    monkeypatch.undo()
    found = [e for begin, end in plans for e in events_in(client, ranges_between(begin, end))]
    assert Counter(found) == Counter(written)
    assert all(len(events_in(client, ranges_between(begin, end))) <= 150 for begin, end in plans)


def test_an_end_clipped_to_a_target_stops_there_while_idle_ticks_raise_the_watermark(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    """Spark's ``Trigger.AvailableNow`` on a live store: nothing new, only ticks: it must end.

    The target is the streams when the query started; once a batch reached
    it, the next end is that batch's own end (Spark plans no batch and the
    query stops), though the store's idle ticks raised every watermark.
    """
    server, client = store
    stream = new_stream_in(client, 2, scope="plan")
    write(client, stream, clock, ["a", "b", "c"], rounds=3)
    plans = planner(client, stream, lag_ms=0)
    begin = plans.start()
    target = plans.tail(begin)
    reached = plans.next(begin, until=target)
    assert reached.watermark == target.watermark
    clock.advance(1_000)
    server.store.advance_idle_segments()  # only the watermarks move
    assert plans.tail(reached).watermark > target.watermark
    assert plans.next(reached, until=target) == reached


def _timed_events(client: StoreClient, ranges: list[SegmentRange]) -> list[tuple[str, int, int]]:
    """``(key, n, ingestion time)`` of each event in ``ranges``."""
    serializer = JsonSerializer()
    found = []
    for segment_range in ranges:
        for result in read_range(client, segment_range):
            for frame in iter_frames(result.data, result.offset):
                event = serializer.deserialize(frame.payload)
                found.append((event["key"], event["n"], frame.ingestion_time))
    return found


def test_a_read_by_time_starts_and_ends_exactly_at_the_ingestion_time_across_a_split(
    store: tuple[Any, StoreClient], clock: ManualClock
) -> None:
    """Start at ``t``: every event ingested at ``t`` or later, none before; end at ``t``: the rest.

    Over a stream whose segment 0 was split between two rounds of writes
    (so the cut lies in the predecessor, in a successor, or between them),
    and with idle ticks between writes; at every event's time and beside it.
    """
    server, client = store
    stream = new_stream_in(client, 2, scope="plan")
    keys = ["a", "b", "c", "d", "e", "f"]
    write(client, stream, clock, keys, rounds=3)
    clock.advance(50)
    scope, name = stream.split("/")
    StreamManager(client).split_segment(scope, name, 0)
    clock.advance(50)
    server.store.advance_idle_segments()
    write(client, stream, clock, keys, rounds=3)
    everything = _timed_events(
        client,
        ranges_between(
            start_frontier(client, stream, "earliest", 0),
            advance_to_tail(client, stream, start_frontier(client, stream, "earliest", 0), 0),
        ),
    )
    assert len(everything) == 36
    times = sorted({t for _, _, t in everything})
    for time_ms in [times[0] - 1, *times, times[3] + 1, times[-1] + 1, clock.now_ms() + 10]:
        after = planner(client, stream, 0, StreamCut.at_time(time_ms))
        begin = after.start()
        read_after = _timed_events(client, ranges_between(begin, after.tail(begin)))
        assert sorted(read_after) == sorted(e for e in everything if e[2] >= time_ms), time_ms
        assert begin.watermark is not None
        assert all(e[2] > begin.watermark for e in read_after)  # the watermark holds

        before = planner(client, stream, 0, "earliest", StreamCut.at_time(time_ms))
        first = before.start()
        read_before = _timed_events(client, ranges_between(first, before.end(first)))
        assert sorted(read_before) == sorted(e for e in everything if e[2] < time_ms), time_ms
        tasks = before.tasks(first, before.end(first))
        for key in keys:  # each key's events in order, successors after predecessors
            in_order = [
                t
                for task in tasks
                for k, _, t in _timed_events(client, list(task.ranges))
                if k == key
            ]
            assert in_order == sorted(in_order)
