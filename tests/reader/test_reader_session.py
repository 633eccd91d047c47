"""A reader group over 1,024 idle segments on a real server: one fetch session per reader.

An event on any segment reaches its reader at once (not when a round robin
of tail reads comes to it), idle ticks still raise the group watermark
strictly, and an idle reader makes one call per wait, whatever the number
of its segments (the server's request counters). Synthetic clock, no idle
advancer: nothing changes unless the test changes it.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from connector.client import JsonSerializer, StoreClient
from connector.clock import ManualClock
from connector.framing import encode_frames, iter_frames
from connector.model import ReadResult
from connector.reader import EventReader, ReaderConfig, ReaderGroup, ReaderGroupManager, TimeDomain
from connector.reader.feed import cut_at
from connector.server import StoreServer
from tests.client.answer_dropping_proxy import AnswerDroppingProxy, Loss
from tests.conftest import new_stream_in, wait_until
from tests.reader.conftest import ReadLog, drain, read_some

WIDE = 1_024
STREAMS = 2  # JetStream holds at most 999 open segments a stream
INGESTION = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)
#: Calls that read one segment: an idle reader makes none.
PER_SEGMENT_CALLS = ("ReadSegment", "GetSegmentInfo", "PlanRead", "PlanReads")


def calls(server: StoreServer, code: str | None = None) -> dict[str, int]:
    """The calls the server answered so far (with status ``code``, None: any), by method."""
    counted: dict[str, int] = {}
    for family in server.metrics.registry.collect():
        for sample in family.samples:
            if sample.name != "tidemark_requests_total":
                continue
            if code is None or sample.labels["code"] == code:
                method = sample.labels["method"]
                counted[method] = counted.get(method, 0) + int(sample.value)
    return counted


def calls_since(server: StoreServer, before: dict[str, int]) -> dict[str, int]:
    """The calls answered since ``before`` (:func:`calls`), by method, those with none left out."""
    now = calls(server)
    return {m: n - before.get(m, 0) for m, n in now.items() if n > before.get(m, 0)}


@pytest.fixture
def wide(
    store_server: StoreServer, store_client: StoreClient, storage: str
) -> tuple[StoreServer, list[str], ReaderGroup]:
    """The server, 1,024 idle segments on it (two streams of 512), a group at their tails."""
    scope = f"wide{uuid.uuid4().hex[:8]}"
    streams = [new_stream_in(store_client, WIDE // STREAMS, scope) for _ in range(STREAMS)]
    group = ReaderGroupManager(store_client).create_reader_group(scope, "g", streams, "latest")
    names = [f"{stream}/{n}" for stream in streams for n in range(WIDE // STREAMS)]
    return store_server, names, group


def events_of(reader: EventReader[object], log: ReadLog, count: int, timeout_ms: int) -> None:
    """Reads until ``count`` events more are in ``log`` or a read times out."""
    wanted = len(log.events) + count
    while len(log.events) < wanted:
        before = len(log.reads)
        read_some(reader, log, 1, timeout_ms)
        if len(log.reads) == before:
            return


def test_an_event_on_any_of_1024_idle_segments_reaches_a_reader_within_a_second(
    wide: tuple[StoreServer, list[str], ReaderGroup], store_client: StoreClient, clock: ManualClock
) -> None:
    server, names, group = wide
    with (
        group.create_reader("a", JsonSerializer(), INGESTION) as a,
        group.create_reader("b", JsonSerializer(), INGESTION) as b,
    ):
        logs = {a: ReadLog(), b: ReadLog()}

        def shared() -> bool:
            for reader, log in logs.items():
                read_some(reader, log, 5, timeout_ms=5)
            return len(a.segments) == len(b.segments) == WIDE // 2

        wait_until(shared, what="the two readers to hold half the segments each")
        for number, name in enumerate(random.Random(31).sample(names, 4)):
            reader = a if name in a.segments else b
            log = logs[reader]
            clock.advance(1)
            sent = time.monotonic()
            store_client.append(name, f"probe-{number}", 0, [json.dumps(number).encode()])
            while not any(r.event == number for r in log.events):
                assert time.monotonic() - sent < 1.0, f"the event on {name!r} took over 1 s"
                read_some(reader, log, 1, timeout_ms=20)
            assert log.events[-1].position.segment == name

        lag = server.store.config.max_watermark_lag_ms
        for _ in range(2):  # each round of idle ticks raises the group watermark, to its time - 1
            clock.advance(lag + 10)
            assert server.store.advance_idle_segments() == WIDE
            ticked = clock.now_ms() - 1

            def risen(ticked: int = ticked) -> bool:
                for reader, log in logs.items():
                    read_some(reader, log, 5, timeout_ms=5)
                return a.last_watermark == b.last_watermark == ticked

            wait_until(risen, what=f"both readers' watermark to reach {ticked}")
        for log in logs.values():
            log.assert_watermark_rules(INGESTION.lag_ms)


@pytest.mark.storages("file", "jetstream")
def test_an_idle_reader_makes_one_call_per_wait_and_none_per_segment(
    wide: tuple[StoreServer, list[str], ReaderGroup], store_client: StoreClient, clock: ManualClock
) -> None:
    server, names, group = wide
    # Syncs far apart: every call in the windows below is the reader's reading.
    with group.create_reader("r", JsonSerializer(), INGESTION, sync_interval_ms=60_000) as reader:
        log = ReadLog()
        read_some(reader, log, 5, timeout_ms=50)
        assert log.watermarks, "the group's watermark was not read"
        assert len(reader.segments) == WIDE

        before = calls(server)
        for wait_ms in (200, 1_000):  # a long wait is one call as a short one is
            assert reader.read_next_event(timeout_ms=wait_ms) is None
        assert calls_since(server, before) == {"ReadSegments": 2}

        before = calls(server)
        clock.advance(server.store.config.max_watermark_lag_ms + 10)
        assert server.store.advance_idle_segments() == WIDE  # every segment's watermark rises
        read_some(reader, log, 1, timeout_ms=1_000)
        assert log.watermarks[-1] == clock.now_ms() - 1
        counted = calls_since(server, before)
        assert counted.get("ReadSegments", 0) <= 2, f"{counted} to take in one tick round"
        assert not set(counted) & set(PER_SEGMENT_CALLS), counted

        before = calls(server)
        for number in range(3):
            store_client.append(names[number * 500], f"w{number}", 0, [b"1"])
        events_of(reader, log, 3, timeout_ms=1_000)
        assert len(log.events) == 3
        counted = calls_since(server, before)
        counted.pop("AppendEvents")
        # The three appends come in one answer, or one each at most: never a call per segment.
        assert 1 <= counted.pop("ReadSegments") <= 3, counted
        assert counted == {}, counted
        log.assert_watermark_rules(INGESTION.lag_ms)


@pytest.fixture
def proxied(
    start_store: Callable[..., StoreServer], storage: str
) -> Iterator[tuple[StoreServer, AnswerDroppingProxy, StoreClient]]:
    """A server, a proxy in front of it that can lose answers, and a client of the proxy."""
    server = start_store()
    proxy = AnswerDroppingProxy(server.address)
    client = StoreClient(proxy.uri, retry_timeout_s=5.0)
    yield server, proxy, client
    client.close()
    proxy.close()


@pytest.mark.storages("file", "jetstream")
def test_a_reader_whose_session_answer_is_lost_reads_every_event_once_in_order(
    proxied: tuple[StoreServer, AnswerDroppingProxy, StoreClient],
) -> None:
    server, proxy, client = proxied
    stream = new_stream_in(client, 2)
    group = ReaderGroupManager(client).create_reader_group(stream.split("/")[0], "g", [stream])
    log = ReadLog()
    with group.create_reader("r", JsonSerializer(), INGESTION) as reader:
        read_some(reader, log, 5, timeout_ms=50)
        for number in range(3):
            client.append(f"{stream}/0", "w", number, [json.dumps(number).encode()])
        # The store answers with the first events; the answer is lost on the way.
        proxy.lose("ReadSegments", 1, Loss.ANSWER)
        drain([(reader, log)], expected=3)
        # The reader's repeat was refused (the session moved on), and a new one opened.
        assert calls(server, "FAILED_PRECONDITION") == {"ReadSegments": 1}
        for number in range(3, 6):
            client.append(f"{stream}/0", "w", number, [json.dumps(number).encode()])
        client.append(f"{stream}/1", "v", 0, [json.dumps(100).encode()])
        drain([(reader, log)], expected=7)
        read_some(reader, log, 5, timeout_ms=20)
    by_segment = {
        n: [r.event for r in log.events if r.position.segment == f"{stream}/{n}"] for n in (0, 1)
    }
    assert by_segment == {0: list(range(6)), 1: [100]}
    log.assert_watermark_rules(INGESTION.lag_ms)


def test_an_answer_past_an_end_cut_is_cut_there_with_what_holds_at_the_cut() -> None:
    frames = [encode_frames([b"e"], ingestion_time) for ingestion_time in (10, 20, 30)]
    data = b"".join(frames)
    end = len(frames[0]) + len(frames[1])
    read = ReadResult(
        "s/t/0",
        0,
        len(data),
        data,
        30,
        True,
        ("s/t/1",),
        event_time_watermark=7,
        event_time_floor=5,
    )
    cut = cut_at(read, end)
    assert [f.ingestion_time for f in iter_frames(cut.data, cut.offset)] == [10, 20]
    assert (cut.next_offset, cut.watermark, cut.end_of_segment, cut.successors) == (
        end,
        29,  # the first event cut off was ingested at 30
        False,
        (),
    )
    assert (cut.event_time_watermark, cut.event_time_floor) == (5, 5)
    assert cut_at(read, len(data)) is read
