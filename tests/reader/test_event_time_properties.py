"""Property: random histories of writers asserting event time keep the event-time rules.

A history mixes several writers (each writing events whose event times rise
past what it asserted, asserting, marking itself idle for good, or crashing:
it stops, and the store times it out), splits and merges, restarts of the
server, readers joining and leaving and reading, and time passing (the
writers still running keep themselves in with an assertion at least every
half timeout). Readers read in the event-time domain, over a real server on
a synthetic clock.

For every generated history:
- each reader's watermarks strictly ascend (the group watermark never falls);
- no watermark is above the least last assertion of the writers active then
  (nobody joins below others here, so that least only rises);
- every event comes after every watermark its reader yielded before it
  (its writer kept its promise: none is late);
- idle and timed-out writers stop holding the watermark back: at the end,
  once the writers still running assert a final time and the crashed ones
  time out, every reader's watermark reaches that time;
- every event written is read exactly once, each key's events in order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.client import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.reader import FieldTimestampAssigner, ReaderConfig, ReaderGroupManager, TimeDomain
from connector.server import StoreServer
from tests.conftest import new_stream_in, wait_until
from tests.reader.conftest import ReadLog, drain, read_some

WRITERS = 3
TIMEOUT_MS = 2_000
START = 1_000_000
_runs = itertools.count()

_step = st.one_of(
    st.tuples(st.just("write"), st.integers(0, WRITERS - 1), st.integers(1, 3)),
    st.tuples(st.just("assert"), st.integers(0, WRITERS - 1), st.just(0)),
    st.tuples(st.just("idle"), st.integers(0, WRITERS - 1), st.just(0)),
    st.tuples(st.just("crash"), st.integers(0, WRITERS - 1), st.just(0)),
    st.tuples(st.just("time"), st.integers(1, 3 * TIMEOUT_MS), st.just(0)),
    st.tuples(st.just("split"), st.integers(0, 10), st.integers(2, 3)),
    st.tuples(st.just("merge"), st.integers(0, 10), st.just(0)),
    st.tuples(st.just("restart"), st.just(0), st.just(0)),
    st.tuples(st.just("join"), st.just(0), st.just(0)),
    st.tuples(st.just("leave"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("read"), st.integers(0, 3), st.integers(1, 12)),
)


@dataclass
class _Writer:
    """One writer of the history: what it promised, how far its events' times went."""

    writer: EventWriter[Any]
    promise: int = START
    latest: int = START
    written: int = 0
    state: str = "running"  # running, idle (for good) or crashed (silent)


@dataclass
class _Server:
    """The store server of the test, restarted in place (same data dir, same address)."""

    start: Callable[..., StoreServer]
    server: StoreServer = field(init=False)
    address: str = "127.0.0.1:0"

    def __post_init__(self) -> None:
        self.server = self.start(listen=self.address, writer_idle_timeout_ms=TIMEOUT_MS)
        self.address = self.server.address

    def restart(self) -> None:
        self.server.stop(grace_s=0.2)
        self.server = self.start(listen=self.address, writer_idle_timeout_ms=TIMEOUT_MS)


@pytest.fixture
def restartable(start_store: Callable[..., StoreServer]) -> _Server:
    """One store server for all of the test's examples, which restart it in place."""
    return _Server(start_store)


@pytest.mark.long
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(_step, min_size=5, max_size=25))
def test_any_history_of_asserting_writers_keeps_the_event_time_rules(
    restartable: _Server, clock: ManualClock, history
) -> None:
    holder = restartable
    run = next(_runs)
    client = StoreClient(holder.server.uri, retry_timeout_s=20.0)
    manager = StreamManager(client)
    name = new_stream_in(client, 2)
    scope, stream = name.split("/")
    group = ReaderGroupManager(client).create_reader_group(scope, f"g{run}", [name])
    config = ReaderConfig(
        time_domain=TimeDomain.EVENT_TIME, timestamp_assigner=FieldTimestampAssigner("t")
    )
    writers = [
        _Writer(EventWriter(client, name, JsonSerializer(), writer_id=f"w{i}-{run}"))
        for i in range(WRITERS)
    ]
    for w in writers:  # every writer joins before anything is written
        w.writer.note_time(w.promise)
    readers: list[tuple[Any, ReadLog]] = []
    retired: list[ReadLog] = []
    names = itertools.count()

    def least_promise() -> int | None:
        running = [w.promise for w in writers if w.state == "running"]
        return min(running) if running else None

    def join() -> None:
        reader = group.create_reader(
            f"r{next(names)}", JsonSerializer(), config, sync_interval_ms=0
        )
        readers.append((reader, ReadLog()))

    def read(reader: Any, log: ReadLog, count: int) -> None:
        before = len(log.reads)
        read_some(reader, log, count, timeout_ms=5)
        bound = least_promise()
        for read_back in log.reads[before:]:
            if read_back.is_watermark and bound is not None:
                assert read_back.watermark <= bound, (
                    f"watermark {read_back.watermark} above the least promise {bound}"
                )

    def let_time_pass(ms: int) -> None:
        """Time passes in steps of half a timeout; the running writers stay in, the rest go."""
        while ms > 0:
            step = min(ms, TIMEOUT_MS // 2)
            ms -= step
            for w in writers:
                if w.state == "running":
                    w.writer.note_time(w.promise)  # a keep-alive: the same promise again
            clock.advance(step)
            holder.server.store.advance_idle_segments()
            holder.server.store.mark_silent_writers_idle()

    join()
    for kind, a, b in history:
        w = writers[a % WRITERS] if kind in ("write", "assert", "idle", "crash") else None
        if kind == "write" and w.state == "running":
            for _ in range(b):
                w.latest += 1 + (w.written * 7) % 40
                w.writer.write_event({"w": a, "n": w.written, "t": w.latest}, routing_key=f"k{a}")
                w.written += 1
            w.writer.flush()
        elif kind == "assert" and w.state == "running":
            w.promise = w.latest
            w.writer.note_time(w.promise)
        elif kind == "idle" and w.state == "running":
            w.writer.mark_idle()
            w.state = "idle"
        elif kind == "crash" and w.state == "running":
            w.writer.flush()
            w.state = "crashed"
        elif kind == "time":
            let_time_pass(a)
        elif kind in ("split", "merge"):
            numbers = [
                int(s.segment.rsplit("/", 1)[1])
                for s in client.describe_stream(scope, stream).open_segments
            ]
            if kind == "split" and len(numbers) < 6:
                manager.split_segment(scope, stream, numbers[a % len(numbers)], b)
            elif kind == "merge" and len(numbers) >= 2:
                i = a % (len(numbers) - 1)
                manager.merge_segments(scope, stream, numbers[i : i + 2])
        elif kind == "restart":
            holder.restart()
        elif kind == "join" and len(readers) < 4:
            join()
        elif kind == "leave" and len(readers) > 1:
            reader, log = readers.pop(a % len(readers))
            reader.close()
            retired.append(log)
        elif kind == "read":
            reader, log = readers[a % len(readers)]
            read(reader, log, b)

    # The end: the running writers assert past every event; the crashed ones time out.
    final = max(w.latest for w in writers) + 1
    for w in writers:
        if w.state == "running":
            w.promise = final
            w.writer.note_time(final)
    let_time_pass(TIMEOUT_MS + 1_000)
    total = sum(w.written for w in writers)
    already = sum(len(log.events) for log in retired)
    drain(readers, expected=total - already, timeout_s=30)
    if any(w.state == "running" for w in writers):

        def all_reached_final() -> bool:
            for reader, log in readers:  # each reader reads its segments on: round-robin
                read_some(reader, log, 20, timeout_ms=5)
            return all((reader.last_watermark or 0) >= final for reader, _ in readers)

        wait_until(all_reached_final, timeout=20, what=f"every reader to reach {final}")

    logs = retired + [log for _, log in readers]
    for log in logs:
        marks = log.watermarks
        assert all(a < b for a, b in zip(marks, marks[1:], strict=False)), marks
        current = None
        for read_back in log.reads:
            if read_back.is_watermark:
                current = read_back.watermark
            else:
                assert not read_back.late and (current is None or read_back.event_time > current), (
                    f"event {read_back.event!r} read after watermark {current}"
                )
    seen = sorted((r.event["w"], r.event["n"]) for log in logs for r in log.events)
    assert seen == sorted((i, n) for i, w in enumerate(writers) for n in range(w.written)), (
        "lost or duplicated"
    )
    for log in logs:
        for i in range(WRITERS):
            numbers = [r.event["n"] for r in log.events if r.event["w"] == i]
            assert numbers == sorted(numbers), f"writer {i}'s key out of order: {numbers}"
    for reader, _ in readers:
        reader.close()
    client.close()
