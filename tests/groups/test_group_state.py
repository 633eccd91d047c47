"""The pure group-state functions: watermark rules without a server."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import FailedPreconditionError, InvalidArgumentError
from connector.groups.compact import compact_state, read_state
from connector.groups.state import (
    GroupState,
    Successor,
    advance,
    finish,
    group_watermark,
    plan_cut,
    stream_cut,
    unassigned_oldest_first,
)
from connector.timestamps import END_OF_TIME


def two_segments() -> GroupState:
    return GroupState.starting_at({"s/t/0": 0, "s/t/1": 0}, {"s/t/0": 99, "s/t/1": 199})


def test_group_watermark_is_the_minimum_over_unfinished_segments() -> None:
    state = advance(two_segments(), "s/t/0", 10, 150)
    assert group_watermark(state) == 150
    state = advance(state, "s/t/0", 20, 300)
    assert group_watermark(state) == 199


def test_advance_never_steps_back() -> None:
    state = advance(two_segments(), "s/t/0", 50, 500)
    stale = advance(state, "s/t/0", 10, 100)
    assert stale.cursors["s/t/0"].offset == 50
    assert stale.cursors["s/t/0"].watermark == 500


def test_a_successor_is_readable_only_after_all_its_predecessors_finish() -> None:
    merged = Successor("s/t/2", ("s/t/0", "s/t/1"), creation_time=1000)
    state = finish(two_segments(), "s/t/0", [merged])
    assert "s/t/2" not in state.cursors
    assert state.waiting["s/t/2"].waiting_for == frozenset({"s/t/1"})
    assert group_watermark(state) == 199  # the waiting successor counts: min(199, 999)
    state = finish(state, "s/t/1", [merged])
    assert state.cursors["s/t/2"].offset == 0
    assert state.cursors["s/t/2"].watermark == 999
    assert group_watermark(state) == 999


def test_a_waiting_successor_holds_the_group_watermark_down() -> None:
    split = [Successor("s/t/2", ("s/t/0",), 150), Successor("s/t/3", ("s/t/0",), 150)]
    state = finish(advance(two_segments(), "s/t/1", 5, 400), "s/t/0", split)
    assert group_watermark(state) == 149


def test_group_watermark_of_a_finished_group_is_end_of_time() -> None:
    state = finish(finish(two_segments(), "s/t/0"), "s/t/1")
    assert state.is_done
    assert group_watermark(state) == END_OF_TIME


def test_finish_of_an_unknown_segment_names_it() -> None:
    with pytest.raises(FailedPreconditionError, match="s/t/9"):
        finish(two_segments(), "s/t/9")
    with pytest.raises(FailedPreconditionError, match="s/t/9"):
        advance(two_segments(), "s/t/9", 1, 1)


def test_unassigned_segments_are_taken_oldest_watermark_first() -> None:
    state = advance(two_segments(), "s/t/0", 1, 500)
    assert unassigned_oldest_first(state, ()) == ["s/t/1", "s/t/0"]
    assert unassigned_oldest_first(state, ["s/t/1"]) == ["s/t/0"]


def test_plan_cut_moves_forward_within_the_end_cut() -> None:
    state = GroupState.starting_at({"a/b/0": 10}, {"a/b/0": 0}, end_cut={"a/b/0": 40})
    assert plan_cut(state, {"a/b/0": 100}) == {"a/b/0": 40}
    assert plan_cut(state, {"a/b/0": 5}) == {"a/b/0": 10}


def test_a_bounded_group_ignores_successors_outside_its_end_cut() -> None:
    state = GroupState.starting_at(
        {"s/t/0": 0}, {"s/t/0": 0}, end_cut={"s/t/2": 30}, bounded_to={"s/t/0", "s/t/2"}
    )
    state = finish(
        state, "s/t/0", [Successor("s/t/2", ("s/t/0",), 10), Successor("s/t/3", ("s/t/0",), 10)]
    )
    assert set(state.cursors) == {"s/t/2"}
    assert state.cursors["s/t/2"].end == 30


def test_json_round_trip_gives_an_equal_state() -> None:
    state = finish(
        advance(two_segments(), "s/t/1", 7, 300),
        "s/t/0",
        [Successor("s/t/2", ("s/t/0", "s/t/1"), 1000)],
    )
    assert GroupState.from_json(state.to_json()) == state
    assert stream_cut(GroupState.from_json(state.to_json())) == {"s/t/1": 7}


def test_invalid_json_is_reported_with_the_text() -> None:
    with pytest.raises(InvalidArgumentError, match="not json"):
        GroupState.from_json("not json")


# --- property: any history of advances and finishes keeps the rules -----------------

_SEGMENTS = ["x/y/0", "x/y/1", "x/y/2", "x/y/3"]
# x/y/0 and x/y/1 merge into x/y/2, which splits into x/y/3 (one successor is enough here).
_SUCCESSORS = {
    "x/y/0": [Successor("x/y/2", ("x/y/0", "x/y/1"), 500)],
    "x/y/1": [Successor("x/y/2", ("x/y/0", "x/y/1"), 500)],
    "x/y/2": [Successor("x/y/3", ("x/y/2",), 900)],
    "x/y/3": [],
}

_operation = st.one_of(
    st.tuples(
        st.just("advance"), st.sampled_from(_SEGMENTS), st.integers(0, 50), st.integers(0, 1200)
    ),
    st.tuples(st.just("finish"), st.sampled_from(_SEGMENTS), st.just(0), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_operation, max_size=40))
def test_any_history_keeps_the_group_watermark_monotone_and_lineage_in_order(
    history: list[tuple[str, str, int, int]],
) -> None:
    state = GroupState.starting_at({"x/y/0": 0, "x/y/1": 0}, {"x/y/0": 99, "x/y/1": 99})
    previous = group_watermark(state)
    for kind, segment, offset, watermark in history:
        if segment not in state.cursors:
            continue
        if kind == "advance":
            # A segment's watermark is bounded by when its successors were created.
            cap = min((s.creation_time - 1 for s in _SUCCESSORS[segment]), default=10**6)
            state = advance(state, segment, offset, min(watermark, cap))
        else:
            state = finish(state, segment, _SUCCESSORS[segment])
        current = group_watermark(state)
        assert current >= previous, f"group watermark stepped back after {kind} {segment}"
        previous = current
        for name in state.cursors:
            preds = next(
                (s.predecessors for ss in _SUCCESSORS.values() for s in ss if s.segment == name), ()
            )
            assert set(preds) <= state.finished, f"{name} readable before {preds} finished"
        assert GroupState.from_json(state.to_json()) == state
        assert read_state(compact_state(state)) == state
