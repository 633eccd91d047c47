"""The compact form of a group state and of a record: equal values back, older forms read."""

from __future__ import annotations

import json

import pytest

from connector.groups.compact import compact_state, joined_names, read_state, split_names
from connector.groups.record import GroupRecord
from connector.groups.state import NO_WRITER, GroupState, SegmentCursor, Successor, advance, finish

SEGMENTS = 4_096
TICKED = 1_795_600_028_667


def mixed() -> GroupState:
    """Readable, waiting and finished segments; every kind of event time and end."""
    state = GroupState.starting_at(
        {"s/t/0": 0, "s/t/1": 5, "s/t/10": 0, "s/u/2": 7},
        {"s/t/0": 99, "s/t/1": 199, "s/t/10": 150, "s/u/2": 100},
        end_cut={"s/t/1": 40},
        event_times={"s/t/0": NO_WRITER, "s/t/10": 120},
    )
    merged = Successor("s/t/3", ("s/t/0", "s/t/10"), 1000)
    return advance(finish(state, "s/t/0", [merged]), "s/u/2", 30, 400, -5)


def wide(segments: int = SEGMENTS) -> GroupState:
    """A stream of ``segments`` idle segments at their tails, ticked within 10 s."""
    names = [f"scale/s0/{n}" for n in range(segments)]
    watermarks = {name: TICKED + (n * 7) % 10_000 for n, name in enumerate(names)}
    return GroupState.starting_at(
        dict.fromkeys(names, 0), watermarks, event_times=dict.fromkeys(names, NO_WRITER)
    )


def test_a_state_reads_back_equal_from_its_compact_form_through_json() -> None:
    for state in (mixed(), wide(16), GroupState()):
        text = json.dumps(compact_state(state))
        assert read_state(json.loads(text)) == state


@pytest.mark.parametrize(
    "names",
    [
        ["s/t/0", "s/t/01", "s/t/x", "s/t/-1", "s/t/²", "s/t/", "plain", "a/b/c/d", "/x"],
        ["s/t/1", "s/u/1", "s/t/2"],  # a prefix that comes back after another
    ],
)
def test_any_segment_name_reads_back_as_written(names: list[str]) -> None:
    assert joined_names(json.loads(json.dumps(split_names(names)))) == names


def test_the_form_of_to_dict_of_any_release_reads_too() -> None:
    state = mixed()
    assert read_state(json.loads(state.to_json())) == state
    before_event_times = {"cursors": {"s/t/2": [0, 999]}, "waiting": {}, "finished": []}
    assert read_state(before_event_times).cursors["s/t/2"] == SegmentCursor(0, 999)


def test_cursors_that_did_not_move_are_the_previous_states_objects() -> None:
    before = wide(64)
    moved = advance(before, "scale/s0/7", 10, TICKED + 20_000)
    after = read_state(json.loads(json.dumps(compact_state(moved))), previous=before)
    assert after == moved
    kept = [s for s, c in after.cursors.items() if c is before.cursors[s]]
    assert sorted(kept) == sorted(set(before.cursors) - {"scale/s0/7"})
    older_form = read_state(json.loads(moved.to_json()), previous=before)
    assert older_form.cursors["scale/s0/0"] is before.cursors["scale/s0/0"]
    finished = finish(moved, "scale/s0/3")  # other segments: matched by name
    other = read_state(json.loads(json.dumps(compact_state(finished))), previous=before)
    assert other == finished and other.cursors["scale/s0/0"] is before.cursors["scale/s0/0"]


def test_an_event_time_that_is_not_a_time_is_refused() -> None:
    data = compact_state(wide(2))
    data["columns"]["event_times"] = ["late", "-"]
    with pytest.raises(TypeError, match="'late'"):
        read_state(data)
    data["columns"]["event_times"] = [None]  # one value for two segments
    with pytest.raises(ValueError, match="1 values for 2 segments"):
        read_state(data)


def test_a_records_stored_form_takes_under_a_third_of_the_bytes_a_segment_of_the_old_form() -> None:
    """Counted at 4,096 idle segments held by two readers: bytes per segment, old and new."""
    state = wide()
    names = sorted(state.cursors)
    assignments = {name: f"r{n % 2}" for n, name in enumerate(names)}
    record = GroupRecord(("scale/s0",), 1, state, assignments, {"r0": 1, "r1": 2})
    stored = record.to_json()
    old_form = json.dumps(
        {**json.loads(stored), "state": state.to_dict(), "assignments": assignments}, sort_keys=True
    )
    new_per_segment, old_per_segment = len(stored) / SEGMENTS, len(old_form) / SEGMENTS
    assert new_per_segment * 3 < old_per_segment, (new_per_segment, old_per_segment)
    assert GroupRecord.from_json(stored) == record


def test_a_record_stored_by_an_older_release_reads_back() -> None:
    stored = (
        b'{"assignments":{"s/t/0":"a","s/t/1":"b"},"checkpoint":null,"checkpoint_pending":["b"],'
        b'"checkpoints":{"cp":{"s/t/0":3}},"generation":3,"leases":{"a":5000,"b":6000},'
        b'"state":{"bounded_to":null,"cursors":{"s/t/0":[10,99,null,null],'
        b'"s/t/1":[0,199,null,9223372036854775807]},"end_cut":null,"finished":["s/t/2"],'
        b'"waiting":{"s/t/4":[499,["s/t/1"],9223372036854775807]}},"streams":["s/t"]}'
    )
    record = GroupRecord.from_json(stored)
    assert record.assignments == {"s/t/0": "a", "s/t/1": "b"}
    assert record.state.cursors["s/t/1"] == SegmentCursor(0, 199, None, NO_WRITER)
    assert record.state.waiting["s/t/4"].waiting_for == {"s/t/1"}
    assert (record.generation, record.checkpoint_pending) == (3, {"b"})
    assert GroupRecord.from_json(record.to_json()) == record  # rewritten in the compact form


def test_an_assignment_of_a_segment_not_readable_reads_back() -> None:
    record = GroupRecord(("s/t",), 1, mixed(), {"s/t/1": "a", "s/t/0": "b", "s/t/3": "a"})
    assert GroupRecord.from_json(record.to_json()) == record
