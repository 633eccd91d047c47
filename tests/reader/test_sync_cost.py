"""What a reader group's bookkeeping costs over thousands of segments: counted work, not timings.

Every :class:`GroupState` built copies its cursor table, so the number of
states a change builds (and the cursors they copy) is the cost counted here.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest

from connector._proto import store_pb2 as pb
from connector.client import JsonSerializer, StoreClient
from connector.clock import ManualClock
from connector.groups.record import GroupRecord
from connector.groups.state import GroupState, Successor
from connector.model import StateValue
from connector.reader import ReaderConfig, ReaderGroup, ReaderGroupManager, TimeDomain
from connector.reader.membership import sync
from connector.reader.source.timekeeping import TimeKeeping
from connector.server import StoreServer
from tests.conftest import new_stream_in, wait_until

SEGMENTS = 4_096
NOW = 1_000_000
LEASE = 30_000


@pytest.fixture
def copied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of the cursor table of each GroupState built from now on (each is a copy)."""
    sizes: list[int] = []
    build = GroupState.__post_init__

    def counting(state: GroupState) -> None:
        build(state)
        sizes.append(len(state.cursors))

    monkeypatch.setattr(GroupState, "__post_init__", counting)
    return sizes


def held_by_one_reader(segments: int) -> GroupRecord:
    names = [f"s/t/{n}" for n in range(segments)]
    state = GroupState.starting_at(dict.fromkeys(names, 0), dict.fromkeys(names, 100))
    base = GroupRecord(("s/t",), 1, state)
    return sync(base, "a", {}, NOW, generation=1, finished={}, lease_ms=LEASE)


def test_a_sync_after_a_tick_round_copies_the_cursor_table_once_not_once_per_segment(
    copied: list[int],
) -> None:
    record = held_by_one_reader(SEGMENTS)
    ticked = {segment: (0, 200, None) for segment in record.state.cursors}
    copied.clear()
    after = sync(record, "a", ticked, NOW, generation=1, finished={}, lease_ms=LEASE)
    assert {c.watermark for c in after.state.cursors.values()} == {200}
    assert sum(copied) <= SEGMENTS, (
        f"{len(copied)} copies of the cursor table, {sum(copied)} cursors"
    )


def test_an_idle_sync_copies_no_cursor_table(copied: list[int]) -> None:
    record = held_by_one_reader(SEGMENTS)
    unchanged = {segment: (0, 100, None) for segment in record.state.cursors}
    copied.clear()
    after = sync(record, "a", unchanged, NOW + 1, generation=1, finished={}, lease_ms=LEASE)
    assert after is record  # nothing to write, nothing looked at again
    assert copied == []


def test_finishing_every_segment_of_a_merged_group_in_one_sync_copies_the_tables_once(
    copied: list[int],
) -> None:
    record = held_by_one_reader(SEGMENTS)
    merges = {
        f"s/t/{n}": [
            Successor(f"s/t/{SEGMENTS + n // 2}", (f"s/t/{n - n % 2}", f"s/t/{n | 1}"), 500)
        ]
        for n in range(SEGMENTS)
    }
    copied.clear()
    after = sync(record, "a", {}, NOW, generation=1, finished=merges, lease_ms=LEASE)
    assert sorted(after.state.cursors) == sorted(
        f"s/t/{SEGMENTS + n}" for n in range(SEGMENTS // 2)
    )
    assert not after.state.waiting
    assert sum(copied) <= SEGMENTS, (
        f"{len(copied)} copies of the cursor table, {sum(copied)} cursors"
    )


# --- a reader over 1,024 idle segments on a real server -----------------------------------

IDLE_SEGMENTS = 1_024
#: A sync every 5 ms, idle or not: the syncs counted here come quickly.
EVERY_5_MS = {"sync_interval_ms": 5, "max_idle_sync_interval_ms": 5}
STREAM_SEGMENTS = 64  # the most a stream is created with


@pytest.fixture
def idle_group(store_client: StoreClient) -> ReaderGroup:
    """A group at the tails of 1,024 idle segments (16 streams of 64), with no reader yet."""
    scope = "idle"
    count = IDLE_SEGMENTS // STREAM_SEGMENTS
    streams = [new_stream_in(store_client, STREAM_SEGMENTS, scope) for _ in range(count)]
    return ReaderGroupManager(store_client).create_reader_group(scope, "g", streams, "latest")


class Counted:
    """Counts calls of methods of one object, or of a class, by name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self._monkeypatch = monkeypatch
        self.calls: collections.Counter[str] = collections.Counter()

    def count(self, owner: Any, name: str, *, classmethod_: bool = False) -> None:
        original = getattr(owner, name)
        original = original.__func__ if classmethod_ else original

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return original(*args, **kwargs)

        self._monkeypatch.setattr(owner, name, classmethod(counting) if classmethod_ else counting)


def test_an_idle_reader_syncs_with_one_store_read_no_write_and_no_parse(
    idle_group: ReaderGroup, store_client: StoreClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Syncs every 5 ms, idle or not (test_idle_sync_pace.py counts how an idle reader spaces them).
    with idle_group.create_reader("r", JsonSerializer(), **EVERY_5_MS) as reader:
        assert len(reader.segments) == IDLE_SEGMENTS
        counted = Counted(monkeypatch)
        counted.count(store_client, "get_state")
        counted.count(store_client, "compare_and_set_state")
        counted.count(GroupRecord, "from_json", classmethod_=True)
        deadline = time.monotonic() + 10
        while counted.calls["get_state"] < 20 and time.monotonic() < deadline:
            assert reader.read_next_event(timeout_ms=20) is None
        syncs = counted.calls["get_state"]
        assert syncs >= 20, f"{syncs} syncs in 10 s"
        assert counted.calls["compare_and_set_state"] == 0, "an idle sync wrote the group's state"
        assert counted.calls["from_json"] == 0, (
            f"{counted.calls['from_json']} parses in {syncs} syncs"
        )


def test_a_read_pass_of_an_idle_reader_looks_at_no_segment(
    idle_group: ReaderGroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)
    with idle_group.create_reader("r", JsonSerializer(), config) as reader:
        first = reader.read_next_event(timeout_ms=1)
        assert first is not None and first.is_watermark  # the group's, once
        counted = Counted(monkeypatch)
        counted.count(TimeKeeping, "kept")  # a segment's part in the watermark, looked at
        passes = 200
        for _ in range(passes):
            assert reader.read_next_event(timeout_ms=1) is None
        looked_at = counted.calls["kept"]
        assert looked_at < IDLE_SEGMENTS, f"{looked_at} segments looked at in {passes} passes"


def test_an_idle_groups_syncs_move_no_record_bytes_and_still_see_the_other_readers_change(
    idle_group: ReaderGroup, store_server: StoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_both(rounds: int) -> None:
        for _ in range(rounds):
            for reader in readers:
                assert reader.read_next_event(timeout_ms=10) is None

    with StoreClient(store_server.uri) as other:
        handle = ReaderGroupManager(other).get_reader_group(idle_group.scope, idle_group.name)
        a = idle_group.create_reader("a", JsonSerializer(), **EVERY_5_MS)
        b = handle.create_reader("b", JsonSerializer(), **EVERY_5_MS)
        readers = [a, b]
        deadline = time.monotonic() + 20
        while len(b.segments) < IDLE_SEGMENTS // 2 and time.monotonic() < deadline:
            read_both(1)
        assert (len(a.segments), len(b.segments)) == (IDLE_SEGMENTS // 2, IDLE_SEGMENTS // 2)
        read_both(5)  # each has seen the other's last write

        answers: list[StateValue] = []
        get_state = StoreClient.get_state

        def counting(client: StoreClient, *args: Any, **kwargs: Any) -> StateValue:
            answers.append(get_state(client, *args, **kwargs))
            return answers[-1]

        monkeypatch.setattr(StoreClient, "get_state", counting)
        read_both(20)
        assert len(answers) >= 40, f"{len(answers)} syncs of two readers in 20 rounds each"
        record_bytes = sum(len(answer.value) for answer in answers)
        assert record_bytes == 0, f"{record_bytes} bytes of the record in {len(answers)} syncs"

        b.close()  # a change by the other reader: it leaves, and a takes its segments
        deadline = time.monotonic() + 10
        while len(a.segments) < IDLE_SEGMENTS and time.monotonic() < deadline:
            assert a.read_next_event(timeout_ms=10) is None
        assert len(a.segments) == IDLE_SEGMENTS
        a.close()


class RecordBytes:
    """The group record's bytes a client moves: values it writes, and values answered to it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.moved = 0
        self.writes = 0
        invoke = StoreClient._invoke

        def counting(client: StoreClient, call: Any, request: Any, *args: Any, **kw: Any) -> Any:
            answer = invoke(client, call, request, *args, **kw)
            if isinstance(request, pb.CompareAndSetStateRequest):
                self.writes += 1
                self.moved += len(request.value) + len(answer.current.value)
            elif isinstance(request, pb.GetStateRequest):
                self.moved += len(answer.value)
            return answer

        monkeypatch.setattr(StoreClient, "_invoke", counting)


def test_a_tick_round_of_two_readers_moves_few_record_bytes_a_segment(
    idle_group: ReaderGroup,
    store_server: StoreServer,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted over gRPC: the record's bytes written and answered, per segment and tick round."""
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)
    with StoreClient(store_server.uri) as other:
        handle = ReaderGroupManager(other).get_reader_group(idle_group.scope, idle_group.name)
        readers = [
            idle_group.create_reader("a", JsonSerializer(), config, sync_interval_ms=5),
            handle.create_reader("b", JsonSerializer(), config, sync_interval_ms=5),
        ]

        def read_both() -> None:
            for reader in readers:
                reader.read_next_event(timeout_ms=5)

        def shared() -> bool:
            read_both()
            return all(len(r.segments) == IDLE_SEGMENTS // 2 for r in readers)

        wait_until(shared, timeout=20, what="the two readers to hold half the segments each")
        counted = RecordBytes(monkeypatch)
        rounds = 2
        for _ in range(rounds):
            clock.advance(store_server.store.config.max_watermark_lag_ms + 10)
            assert store_server.store.advance_idle_segments() == IDLE_SEGMENTS
            ticked = clock.now_ms() - 1

            def risen(ticked: int = ticked) -> bool:
                read_both()
                return all(r.last_watermark == ticked for r in readers)

            wait_until(risen, timeout=20, what=f"both readers' watermark to reach {ticked}")
        moved, writes = counted.moved, counted.writes
        for reader in readers:
            reader.close()
    per_segment = moved / (rounds * IDLE_SEGMENTS)
    assert writes >= rounds, "the readers wrote no position"
    assert per_segment < 100, (
        f"{per_segment:.0f} bytes of the record a segment a round, {writes} writes"
    )
