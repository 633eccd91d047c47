"""Calls over many segments on a real server over gRPC: DescribeTails, ReadSegments, PlanReads.

A fetch session over 1,024 idle segments wakes at once on an append to any
of them and answers idle ticks' watermark rises; an idle session makes one
call per answer and none between (the server's request counters); a tails
description with nothing changed answers nothing; flow control, budgets,
per-segment failures, a lost answer (the session reopened, nothing read
twice or skipped) and the limits, refused by name and shown in metrics.
Synthetic clock, no idle advancer: nothing changes unless a test changes it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from connector.client import FetchSession, StoreClient
from connector.clock import ManualClock
from connector.errors import (
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    TruncatedError,
)
from connector.framing import iter_frames
from connector.model import PlannedRead, PlanRequest, ReadResult, StreamTails
from connector.server import StoreServer
from connector.server.fetch_sessions import FetchLimits
from connector.store import StorageConfig
from tests.client.answer_dropping_proxy import AnswerDroppingProxy, Loss
from tests.conftest import WIDE, new_stream_in, wait_until
from tests.probes import calls

SERVICE = "tidemark.v1.SegmentStore"


def gauge(server: StoreServer, name: str, **labels: str) -> float:
    """A gauge of the server's metrics now (0 when absent)."""
    return server.metrics.registry.get_sample_value(f"tidemark_{name}", labels) or 0.0


def payloads(read: ReadResult) -> list[bytes]:
    """The events a read returned."""
    return [frame.payload for frame in iter_frames(read.data, read.offset)]


def drain(session: FetchSession, rounds: int = 10) -> list[ReadResult]:
    """Every answer of the session until one is empty (bounded in calls)."""
    reads: list[ReadResult] = []
    for _ in range(rounds):
        result = session.fetch()
        if not result.reads:
            return reads
        reads += result.reads
    msg = f"the session still answered after {rounds} calls"
    raise AssertionError(msg)


def test_a_session_over_1024_idle_segments_wakes_at_an_append_to_any_and_at_idle_ticks(
    wide: tuple[StoreServer, StoreClient, str], clock: ManualClock
) -> None:
    server, client, stream = wide
    names = [f"{stream}/{n}" for n in range(WIDE)]
    with FetchSession(client) as session, ThreadPoolExecutor(1) as waiter:
        for name in names:
            session.add(name, 0)
        first = drain(session)  # a new cursor tells its watermarks at once
        assert sorted(r.segment for r in first) == sorted(names)
        known = {r.segment: r.watermark for r in first}
        for probe in (0, 517, WIDE - 1):
            waiting = waiter.submit(session.fetch, 10_000)
            wait_until(lambda: gauge(server, "parked_calls", method="ReadSegments") == 1)
            client.append(names[probe], "probe", 0, [f"p{probe}".encode()])
            result = waiting.result(timeout=1.0)  # woken by the append, not by its 10 s wait
            [read] = result.reads
            assert (read.segment, payloads(read)) == (names[probe], [f"p{probe}".encode()])
            known[read.segment] = read.watermark
            session.rearm(read.segment)

        clock.advance(server.store.config.max_watermark_lag_ms + 10)
        assert server.store.advance_idle_segments() == WIDE
        risen: dict[str, int] = {}
        for _ in range(5):  # a tick round is answered in a few calls at most
            for read in session.fetch(1_000).reads:
                assert not read.data and read.watermark > known[read.segment]
                risen[read.segment] = read.watermark
            if len(risen) == WIDE:
                break
        assert len(risen) == WIDE
        assert set(risen.values()) == {clock.now_ms() - 1}


def test_an_idle_session_makes_one_call_per_answer_and_none_between(
    wide: tuple[StoreServer, StoreClient, str],
) -> None:
    server, client, stream = wide
    with FetchSession(client) as session:
        for n in range(WIDE):
            session.add(f"{stream}/{n}", 0)
        drain(session)
        before, reads_before = calls(server), calls(server, "ReadSegments")
        for _ in range(3):
            assert session.fetch(200).reads == ()  # nothing changes: each call waits, then ends
        assert calls(server, "ReadSegments") - reads_before == 3
        assert calls(server) - before == 3  # nothing else was called
        assert gauge(server, "fetch_session_segments") == WIDE
        assert gauge(server, "fetch_session_armed_segments") == WIDE
        assert gauge(server, "parked_calls", method="ReadSegments") == 0


def test_describe_tails_over_1024_segments_answers_only_what_changed_and_waits_for_it(
    wide: tuple[StoreServer, StoreClient, str],
) -> None:
    server, client, stream = wide
    [complete] = client.describe_tails([stream])
    assert isinstance(complete, StreamTails) and complete.complete
    assert len(complete.segments) == WIDE
    assert all(t.write_offset == 0 and not t.sealed for t in complete.segments)
    [same] = client.describe_tails([complete])
    assert isinstance(same, StreamTails)
    assert (same.complete, same.segments, same.version) == (False, (), complete.version)

    client.append(f"{stream}/700", "w", 0, [b"e"])
    [changed] = client.describe_tails([same])
    assert isinstance(changed, StreamTails)
    [tail] = changed.segments
    assert tail.segment == f"{stream}/700" and tail.write_offset > 0

    with ThreadPoolExecutor(1) as waiter:
        waiting = waiter.submit(client.describe_tails, [changed], 10_000)
        wait_until(lambda: gauge(server, "parked_calls", method="DescribeTails") == 1)
        client.append(f"{stream}/3", "w", 0, [b"e"])
        [woken] = waiting.result(timeout=1.0)
    assert isinstance(woken, StreamTails)
    assert [t.segment for t in woken.segments] == [f"{stream}/3"]
    [quiet] = client.describe_tails([woken], wait_ms=100)  # nothing changes: empty, after the wait
    assert isinstance(quiet, StreamTails) and quiet.segments == ()
    [missing] = client.describe_tails(["nowhere/none"])
    assert isinstance(missing, NotFoundError)


@pytest.mark.storages("file", "jetstream")
def test_a_segment_answered_with_data_waits_to_be_rearmed_and_budgets_share_answers(
    start_store: Callable[..., StoreServer], storage: str
) -> None:
    server = start_store()
    with StoreClient(server.uri, retry_timeout_s=5.0) as client:
        stream = new_stream_in(client, 3)
        names = [f"{stream}/{n}" for n in range(3)]
        for name in names:
            client.append(name, "w", 0, [bytes(100)] * 3)
        with FetchSession(client, max_bytes=150, max_bytes_per_segment=150) as session:
            for name in names:
                session.add(name, 0)
            first = session.fetch()
            # One event of ~119 bytes each: the budget of 150 takes two segments' events.
            assert [(r.segment, len(payloads(r))) for r in first.reads] == [
                (names[0], 1),
                (names[1], 1),
            ]
            second = session.fetch()  # the one left over comes first, the disarmed not at all
            assert [(r.segment, len(payloads(r))) for r in second.reads] == [(names[2], 1)]
            assert session.fetch(100).reads == ()
            session.rearm(names[1])
            [again] = session.fetch().reads
            assert (again.segment, again.offset) == (names[1], first.reads[1].next_offset)
            assert len(payloads(again)) == 1


@pytest.mark.storages("file", "jetstream")
def test_a_segment_that_fails_leaves_the_session_with_its_own_error(
    start_store: Callable[..., StoreServer], storage: str
) -> None:
    server = start_store()
    with StoreClient(server.uri, retry_timeout_s=5.0) as client:
        stream = new_stream_in(client, 2)
        scope, name = stream.split("/")
        written = [client.append(f"{stream}/0", "w", n, [b"event"]) for n in range(3)]
        client.truncate_stream(scope, name, {0: written[1].write_offset})
        with FetchSession(client) as session:
            session.add(f"{stream}/0", 0)
            session.add(f"{stream}/1", 0)
            session.add(f"{stream}/1", 3)  # moved: inside no event, as segment 1 is empty
            session.add(f"{scope}/none/0", 0)
            session.add(f"{stream}/9", 0)
            result = session.fetch()
        errors = dict(result.failures)
        assert isinstance(errors[f"{stream}/0"], TruncatedError)
        assert errors[f"{stream}/0"].first_offset == written[1].write_offset
        assert isinstance(errors[f"{stream}/1"], InvalidArgumentError)
        assert isinstance(errors[f"{scope}/none/0"], NotFoundError)
        assert isinstance(errors[f"{stream}/9"], NotFoundError)
        assert session.segments == ()


@pytest.mark.storages("file", "jetstream")
def test_a_lost_answer_reopens_the_session_and_nothing_is_read_twice_or_skipped(
    start_store: Callable[..., StoreServer], storage: str
) -> None:
    server = start_store()
    proxy = AnswerDroppingProxy(server.address)
    try:
        with StoreClient(proxy.uri, retry_timeout_s=5.0) as client:
            stream = new_stream_in(client, 4)
            names = [f"{stream}/{n}" for n in range(4)]
            with FetchSession(client) as session:
                for name in names:
                    session.add(name, 0)
                drain(session)
                client.append(names[2], "w", 0, [b"e0"])
                proxy.lose("ReadSegments", 1, Loss.ANSWER)  # the store answered; the answer is lost
                lost = session.fetch(1_000)
                assert lost.reopened
                assert [(r.segment, payloads(r)) for r in lost.reads] == [(names[2], [b"e0"])]
                client.append(names[2], "w", 1, [b"e1"])
                client.append(names[3], "w", 0, [b"f0"])
                session.rearm(names[2])
                later = drain(session)
                assert sorted((r.segment, *payloads(r)) for r in later) == [
                    (names[2], b"e1"),
                    (names[3], b"f0"),
                ]
        assert gauge(server, "fetch_sessions") == 0  # the lost one closed; this one closed
    finally:
        proxy.close()


def test_plan_reads_answers_each_plan_or_its_own_error_in_order(
    store_client: StoreClient,
) -> None:
    stream = new_stream_in(store_client, 2)
    written = store_client.append(f"{stream}/0", "w", 0, [b"a", b"b", b"c"])
    plans = store_client.plan_reads(
        [
            PlanRequest(f"{stream}/0", 0, max_events=2),
            PlanRequest(f"{stream}/0", 3),
            PlanRequest(f"{stream}/1", 0),
            PlanRequest("no/such/0", 0),
        ]
    )
    first, inside, empty, missing = plans
    assert isinstance(first, PlannedRead) and first.events == 2 and not first.at_tail
    assert isinstance(inside, InvalidArgumentError)
    assert isinstance(empty, PlannedRead) and empty.at_tail and empty.events == 0
    assert isinstance(missing, NotFoundError)
    assert first == store_client.plan_read(f"{stream}/0", 0, max_events=2)
    assert written.appended == 3


def test_limits_are_refused_by_name_and_the_sessions_are_counted_in_metrics(
    storage_config: Callable[..., StorageConfig],
) -> None:
    limits = FetchLimits(sessions_per_connection=2, session_segments=3)
    with (
        StoreServer(storage_config(), fetch_limits=limits) as server,
        StoreClient(server.uri, retry_timeout_s=5.0) as client,
    ):
        stream = new_stream_in(client, 4)
        one, two, three = (FetchSession(client) for _ in range(3))
        for n in range(3):
            one.add(f"{stream}/{n}", 0)
        assert len(one.fetch().reads) == 3
        one.add(f"{stream}/3", 0)
        with pytest.raises(ResourceExhaustedError, match="--max-fetch-session-segments 3") as over:
            one.fetch()
        assert over.value.cause == "fetch_session_segments_limit"
        one.release(f"{stream}/3")
        assert one.fetch().reads == ()  # refused before anything changed: the session goes on
        two.add(f"{stream}/3", 0)
        two.fetch()
        three.add(f"{stream}/3", 0)
        with pytest.raises(ResourceExhaustedError, match="--max-fetch-sessions-per-connection 2"):
            three.fetch()
        assert gauge(server, "fetch_sessions") == 2
        assert gauge(server, "fetch_session_segments") == 4
        client.append(f"{stream}/3", "w", 0, [b"e"])
        assert len(two.fetch().reads) == 1  # data: disarmed until re-armed
        assert gauge(server, "fetch_session_armed_segments") == 3
        for session in (one, two, three):
            session.close()
        assert gauge(server, "fetch_sessions") == 0
