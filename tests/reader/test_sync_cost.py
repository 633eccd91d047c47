"""What a reader group's bookkeeping costs over thousands of segments: counted work, not timings.

Every :class:`GroupState` built copies its cursor table, so the number of
states a change builds (and the cursors they copy) is the cost counted here.
"""

from __future__ import annotations

import pytest

from connector.groups.record import GroupRecord
from connector.groups.state import GroupState, Successor
from connector.reader.membership import sync

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
    assert after == record  # nothing to write
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
