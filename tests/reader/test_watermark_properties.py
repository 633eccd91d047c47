"""Property: random histories keep the watermark rules, over a real server on a synthetic clock.

A history mixes writes, scaling, readers joining and leaving, and idle periods.

For every generated history:
- each reader's watermarks strictly ascend;
- every event a reader returns after watermark W was ingested after W + lag;
- every event written is read exactly once (readers leave cleanly here);
- events of one routing key are read in the order written.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.client import EventWriter, JsonSerializer, StreamManager
from connector.reader import ReaderConfig, ReaderGroupManager, TimeDomain
from tests.conftest import new_stream_in
from tests.reader.conftest import ReadLog, drain, read_some

pytestmark = [pytest.mark.long, pytest.mark.storages("file", "jetstream")]

LAG_MS = 3
_runs = itertools.count()

_step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5), st.integers(1, 4)),
    st.tuples(st.just("idle"), st.integers(1, 15_000), st.just(0)),
    st.tuples(st.just("split"), st.integers(0, 10), st.integers(2, 3)),
    st.tuples(st.just("merge"), st.integers(0, 10), st.just(0)),
    st.tuples(st.just("join"), st.just(0), st.just(0)),
    st.tuples(st.just("leave"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("read"), st.integers(0, 3), st.integers(1, 12)),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(_step, min_size=5, max_size=30))
def test_any_history_keeps_the_watermark_rules(store_server, store_client, clock, history) -> None:
    run = next(_runs)
    manager = StreamManager(store_client)
    name = new_stream_in(store_client, 2)
    scope, stream = name.split("/")
    group = ReaderGroupManager(store_client).create_reader_group(scope, f"g{run}", [name])
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME, max_event_time_lag=LAG_MS)
    writer = EventWriter(store_client, name, JsonSerializer())
    readers: list[tuple[Any, ReadLog]] = []
    retired: list[ReadLog] = []
    written: dict[int, int] = {}
    names = itertools.count()

    def join() -> None:
        reader = group.create_reader(
            f"r{next(names)}", JsonSerializer(), config, sync_interval_ms=0
        )
        readers.append((reader, ReadLog()))

    join()
    for kind, a, b in history:
        if kind == "append":
            for _ in range(b):
                written[a] = written.get(a, 0) + 1
                writer.write_event({"key": a, "n": written[a] - 1}, routing_key=f"key-{a}")
            writer.flush()
            clock.advance(2)
        elif kind == "idle":
            clock.advance(a)
            store_server.store.advance_idle_segments()
        elif kind in ("split", "merge"):
            open_segments = store_client.describe_stream(scope, stream).open_segments
            numbers = [int(s.segment.rsplit("/", 1)[1]) for s in open_segments]
            if kind == "split" and len(numbers) < 6:
                manager.split_segment(scope, stream, numbers[a % len(numbers)], b)
            elif kind == "merge" and len(numbers) >= 2:
                i = a % (len(numbers) - 1)
                manager.merge_segments(scope, stream, numbers[i : i + 2])
        elif kind == "join" and len(readers) < 4:
            join()
        elif kind == "leave" and len(readers) > 1:
            reader, log = readers.pop(a % len(readers))
            reader.close()
            retired.append(log)
        elif kind == "read":
            reader, log = readers[a % len(readers)]
            read_some(reader, log, b, timeout_ms=5)
    writer.close()
    total = sum(written.values())
    already = sum(len(log.events) for log in retired)
    drain(readers, expected=total - already, timeout_s=30)

    logs = retired + [log for _, log in readers]
    for log in logs:
        log.assert_watermark_rules(lag_ms=LAG_MS)
    seen = sorted((r.event["key"], r.event["n"]) for log in logs for r in log.events)
    assert seen == sorted((k, n) for k, count in written.items() for n in range(count)), (
        "lost or duplicated"
    )
    # Per key order: within each reader's log, and across hand-overs by position order.
    for log in logs:
        for key in written:
            numbers = [r.event["n"] for r in log.events if r.event["key"] == key]
            assert numbers == sorted(numbers), f"key {key} out of order: {numbers}"
    for reader, _ in readers:
        reader.close()
