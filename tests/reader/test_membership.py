"""Group membership rules as pure functions: no server, the store's time passed in."""

from __future__ import annotations

import json

import pytest

from connector.errors import FailedPreconditionError
from connector.groups.record import GroupRecord
from connector.groups.state import GroupState, Successor
from connector.reader.membership import (
    ReaderGroupResetError,
    cancel_checkpoint,
    complete_checkpoint,
    leave,
    rebalance,
    report,
    request_checkpoint,
    reset,
    sync,
)

NOW = 1_000_000
LEASE = 10_000


def record(segments: int = 4, **fields: object) -> GroupRecord:
    state = GroupState.starting_at(
        {f"s/t/{n}": 0 for n in range(segments)}, {f"s/t/{n}": 100 + n for n in range(segments)}
    )
    return GroupRecord(("s/t",), 1, state, **fields)  # type: ignore[arg-type]


def joined(base: GroupRecord, reader: str, now: int = NOW) -> GroupRecord:
    return sync(base, reader, {}, now, generation=1, finished={}, lease_ms=LEASE)


def test_a_first_reader_takes_every_segment_and_a_lease() -> None:
    after = joined(record(), "a")
    assert after.segments_of("a") == ["s/t/0", "s/t/1", "s/t/2", "s/t/3"]
    assert after.leases == {"a": NOW + LEASE}


def test_readers_converge_to_equal_shares_oldest_watermark_first() -> None:
    both = joined(joined(record(), "a"), "b")
    assert both.segments_of("b") == []  # nothing free yet: a holds all four
    both = joined(joined(both, "a"), "b")  # a gives back above its share, b takes
    assert both.segments_of("a") == ["s/t/0", "s/t/1"]  # a keeps its oldest
    assert both.segments_of("b") == ["s/t/2", "s/t/3"]


def test_rebalance_takes_free_segments_oldest_watermark_first() -> None:
    state = record().state
    assert rebalance(state, {}, "a", 2) == {"s/t/0": "a", "s/t/1": "a"}
    assert rebalance(state, {"s/t/0": "b"}, "a", 2) == {"s/t/0": "b", "s/t/1": "a", "s/t/2": "a"}


def test_a_lease_is_renewed_at_half_life_not_on_every_sync() -> None:
    first = joined(record(), "a")
    assert joined(first, "a", NOW + LEASE // 2 - 1).leases["a"] == NOW + LEASE
    assert joined(first, "a", NOW + LEASE // 2 + 1).leases["a"] == NOW + LEASE // 2 + 1 + LEASE


def test_an_expired_lease_loses_its_segments_to_the_next_syncing_reader() -> None:
    base = joined(joined(joined(joined(record(), "a"), "b"), "a"), "b")
    later = NOW + LEASE + 1
    taken = joined(base, "b", later)
    assert "a" not in taken.leases
    assert taken.segments_of("b") == ["s/t/0", "s/t/1", "s/t/2", "s/t/3"]


def test_positions_are_reported_only_for_segments_the_reader_holds() -> None:
    base = record(assignments={"s/t/0": "a", "s/t/1": "b"})
    state = report(base, "a", {"s/t/0": (50, 500), "s/t/1": (70, 700)})
    assert (state.cursors["s/t/0"].offset, state.cursors["s/t/0"].watermark) == (50, 500)
    assert state.cursors["s/t/1"].offset == 0


def test_a_finished_segment_brings_in_a_successor_only_after_all_its_predecessors() -> None:
    merged = Successor("s/t/4", ("s/t/0", "s/t/1"), 900)
    base = joined(record(2), "a")
    one = sync(base, "a", {}, NOW, generation=1, finished={"s/t/0": [merged]}, lease_ms=LEASE)
    assert "s/t/4" in one.state.waiting and "s/t/4" not in one.state.cursors
    two = sync(one, "a", {}, NOW, generation=1, finished={"s/t/1": [merged]}, lease_ms=LEASE)
    assert two.state.cursors["s/t/4"].watermark == 899
    assert two.segments_of("a") == ["s/t/4"]


def test_a_reader_of_an_older_generation_is_refused_and_its_leave_changes_nothing() -> None:
    base = joined(record(), "a")
    newer = reset(base, record().state, NOW)
    assert newer.generation == 2 and not newer.leases and not newer.assignments
    with pytest.raises(ReaderGroupResetError):
        sync(newer, "a", {}, NOW, generation=1, finished={}, lease_ms=LEASE)
    assert leave(newer, "a", {"s/t/0": (9, 9)}, NOW, generation=1) == newer


def test_leaving_reports_positions_and_gives_everything_back() -> None:
    base = request_checkpoint(joined(record(), "a"), "cp", NOW)
    gone = leave(base, "a", {"s/t/0": (40, 400)}, NOW, generation=1)
    assert gone.assignments == {} and gone.leases == {} and gone.checkpoint_pending == frozenset()
    assert gone.state.cursors["s/t/0"].offset == 40


def test_a_checkpoint_waits_for_every_leased_reader_and_records_the_reported_cut() -> None:
    base = joined(joined(record(), "a"), "b")
    asked = request_checkpoint(base, "cp", NOW)
    assert asked.checkpoint_pending == {"a", "b"}
    with pytest.raises(FailedPreconditionError, match="'cp' is still in progress"):
        request_checkpoint(asked, "other", NOW)
    one = sync(asked, "a", {"s/t/0": (30, 300)}, NOW, generation=1, finished={}, lease_ms=LEASE)
    assert one.checkpoint_pending == {"b"}
    expired = joined(one, "a", NOW + LEASE + 1)  # b's lease ran out: not waited for
    assert expired.checkpoint_pending == frozenset()
    done = complete_checkpoint(expired, "cp", NOW)
    assert done.checkpoint is None
    assert done.checkpoints["cp"] == {"s/t/0": 30, "s/t/1": 0, "s/t/2": 0, "s/t/3": 0}
    assert cancel_checkpoint(asked, NOW).checkpoint is None


def test_a_record_round_trips_through_its_stored_form() -> None:
    base = request_checkpoint(joined(record(), "a"), "cp", NOW)
    assert GroupRecord.from_json(base.to_json()) == base


def test_the_stored_form_is_compact_json_and_the_spaced_form_stored_before_reads_back() -> None:
    base = request_checkpoint(joined(record(), "a"), "cp", NOW)
    stored = base.to_json()
    assert b" " not in stored
    spaced = json.dumps(json.loads(stored), sort_keys=True).encode()  # as records were stored
    assert len(spaced) > len(stored)
    assert GroupRecord.from_json(spaced) == base
