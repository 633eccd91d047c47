"""An idle reader syncs ever less often, down to its bound, and at once again when anything moves.

The rule as plain values (:class:`SyncPace`, :func:`idle_sync_bound_ms`,
:func:`waits_for_segments`), then two idle readers on a real server over
gRPC, counted by the server's request counters: a handful of calls per
wait, not one every sync interval; and a reader joining them, and an
event on one of their segments, still come through at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from connector.client import JsonSerializer, StoreClient
from connector.clock import ManualClock
from connector.errors import InvalidArgumentError
from connector.reader import EventReader, ReaderGroup, ReaderGroupManager
from connector.reader.sync_pace import SyncPace, idle_sync_bound_ms, waits_for_segments
from connector.server import StoreServer
from tests.conftest import new_stream_in, wait_until
from tests.probes import CallCounter
from tests.reader.conftest import ReadLog, read_some

# --- the rule, as plain values ------------------------------------------------------------


def test_idle_syncs_double_the_gap_up_to_the_bound_and_a_busy_one_brings_the_interval_back() -> (
    None
):
    pace = SyncPace(100, 1_000)
    gaps = []
    for _ in range(6):
        pace.synced(idle=True)
        gaps.append(pace.gap_s(moved=False))
    assert gaps == [0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert pace.gap_s(moved=True) == 0.1  # a held segment moved: the interval at once
    pace.synced(idle=False)
    assert pace.gap_s(moved=False) == 0.1


def test_only_a_backed_off_sync_may_come_late_and_by_at_most_half_its_gap() -> None:
    pace = SyncPace(100, 1_000)
    assert not pace.may_come_late(0.01, moved=False)  # at the interval: on time
    pace.synced(idle=True)
    pace.synced(idle=True)  # a gap of 0.4 s
    assert pace.may_come_late(0.2, moved=False)
    assert not pace.may_come_late(0.21, moved=False)
    assert not pace.may_come_late(0.01, moved=True)  # something moved: on time


def test_an_interval_of_zero_syncs_on_every_pass_idle_or_not() -> None:
    pace = SyncPace(0, 1_000)
    for _ in range(3):
        pace.synced(idle=True)
    assert pace.gap_s(moved=False) == 0


def test_the_idle_bound_is_at_most_a_quarter_of_the_lease_and_at_least_the_interval() -> None:
    assert idle_sync_bound_ms(1_000, 100, 30_000) == 1_000
    assert idle_sync_bound_ms(1_000, 100, 2_000) == 500  # renewed well before it runs out
    assert idle_sync_bound_ms(50, 100, 30_000) == 100  # below the interval: no backing off
    assert idle_sync_bound_ms(0, 0, 1_000) == 0


@pytest.mark.parametrize("bad", [-1, 3_600_001, 1.5, "1000", True, None])
def test_a_bad_idle_bound_is_refused_naming_the_option_and_the_value(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"max_idle_sync_interval_ms.*" + repr(bad)):
        idle_sync_bound_ms(bad, 100, 30_000)


def test_a_reader_below_its_share_waits_while_segments_are_free_or_another_holds_too_many() -> None:
    assert not waits_for_segments(readable=16, assigned=16, readers=2, held=8, most=8)
    assert waits_for_segments(readable=16, assigned=16, readers=2, held=0, most=16)  # joined
    assert waits_for_segments(readable=16, assigned=15, readers=2, held=7, most=8)  # one free
    assert not waits_for_segments(readable=16, assigned=15, readers=2, held=8, most=8)  # at share
    # 4 over 3 readers: a share is 2, both holders are at it, so the third gets none.
    assert not waits_for_segments(readable=4, assigned=4, readers=3, held=0, most=2)


# --- two idle readers on a real server ----------------------------------------------------

INTERVAL_MS = 5
BOUND_MS = 100
SEGMENTS = 6


Pair = tuple[ReaderGroup, EventReader[Any], EventReader[Any]]


@pytest.fixture
def idle_pair(store_server: StoreServer, store_client: StoreClient) -> Iterator[Pair]:
    """A group over an idle stream of 6 segments, two readers holding 3 each, settled idle."""
    stream = new_stream_in(store_client, SEGMENTS)
    scope = stream.partition("/")[0]
    group = ReaderGroupManager(store_client).create_reader_group(scope, "g", [stream], "latest")
    with (
        reader_of(group, "a") as a,
        StoreClient(store_server.uri, retry_timeout_s=2.0) as own,
        reader_of(ReaderGroupManager(own).get_reader_group(scope, "g"), "b") as b,
    ):

        def shared() -> bool:
            for reader in (a, b):
                assert reader.read_next_event(timeout_ms=5) is None
            return len(a.segments) == len(b.segments) == SEGMENTS // 2

        wait_until(shared, what="the two readers to hold three segments each")
        for reader in (a, b):  # past the doublings to the bound: 10 + 20 + 40 + 80 ms
            assert reader.read_next_event(timeout_ms=4 * BOUND_MS) is None
        yield group, a, b


def reader_of(group: ReaderGroup, name: str) -> EventReader[Any]:
    return group.create_reader(
        name, JsonSerializer(), sync_interval_ms=INTERVAL_MS, max_idle_sync_interval_ms=BOUND_MS
    )


def test_two_idle_readers_make_a_few_calls_per_wait_not_one_per_sync_interval(
    idle_pair: Pair, store_server: StoreServer
) -> None:
    _, a, b = idle_pair
    counter = CallCounter(store_server)
    waits = 3
    for _ in range(waits):
        for reader in (a, b):  # each wait is twice the bound: about two syncs and two waits
            assert reader.read_next_event(timeout_ms=2 * BOUND_MS) is None
    calls = counter.since()
    # Every 5 ms, each wait would be about 40 GetState and 40 ReadSegments.
    most = 4 * waits * 2
    assert calls.get("GetState", 0) <= most, calls
    assert calls.get("ReadSegments", 0) <= most, calls
    assert calls.get("CompareAndSetState", 0) == 0, calls  # nothing moved: nothing written


def test_an_idle_readers_short_waits_are_one_call_each_its_syncs_come_at_their_ends(
    idle_pair: Pair, store_server: StoreServer
) -> None:
    _, a, _ = idle_pair
    counter = CallCounter(store_server)
    waits = 10
    for _ in range(waits):  # 40 ms each: a sync due within one (gap 100 ms) comes at its end
        assert a.read_next_event(timeout_ms=BOUND_MS * 2 // 5) is None
    calls = counter.since()
    # Syncs cutting waits in two would make about 4 more (a sync every 100 ms).
    assert calls.get("ReadSegments", 0) <= waits + 1, calls
    assert 1 <= calls.get("GetState", 0) <= waits // 2, calls


def test_a_reader_joining_idle_readers_gets_its_share_within_a_few_bounds(
    idle_pair: Pair,
) -> None:
    group, a, b = idle_pair
    with reader_of(group, "c") as c:

        def balanced() -> bool:
            for reader in (a, b, c):
                assert reader.read_next_event(timeout_ms=5) is None
            return [len(r.segments) for r in (a, b, c)] == [2, 2, 2]

        wait_until(balanced, what="c to get its share")


def test_an_event_on_an_idle_readers_segment_reaches_it_at_once(
    idle_pair: Pair,
    store_client: StoreClient,
    clock: ManualClock,
) -> None:
    _, a, b = idle_pair
    log = ReadLog()
    clock.advance(1)
    store_client.append(b.segments[0], "w", 0, [json.dumps("news").encode()])
    # b's long wait is answered by the change, not by its end.
    read_some(b, log, 1, timeout_ms=5_000)
    assert [r.event for r in log.events] == ["news"]
