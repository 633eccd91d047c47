"""The budget planner's decision, a pure function over what the store measured (no server)."""

from __future__ import annotations

from connector.groups.state import GroupState, Successor, advance
from connector.model import PlannedRead
from connector.reader.source.budget import Left, Measured, apply, decide
from connector.reader.source.ranges import SegmentRange


def plan(
    segment: str,
    offset: int,
    events: int,
    size: int,
    watermark: int,
    at_tail: bool = False,
    end: bool = False,
) -> PlannedRead:
    return PlannedRead(segment, offset, offset + size, events, watermark, end, at_tail)


def two_segments() -> GroupState:
    # s/t/1 (watermark 199) is older than s/t/0 (500 once it read a byte).
    start = GroupState.starting_at({"s/t/0": 0, "s/t/1": 0}, {"s/t/0": 99, "s/t/1": 199})
    return advance(start, "s/t/0", 1, 500)


def test_the_budget_serves_the_oldest_segment_first_and_the_next_with_what_is_left() -> None:
    measured = [
        Measured("s/t/1", (plan("s/t/1", 0, 8, 80, 300, at_tail=True),)),
        Measured("s/t/0", (plan("s/t/0", 1, 2, 20, 600),)),
    ]
    decision = decide(two_segments(), measured, Left(None, 100), planned_any=False)
    assert decision.reached == {"s/t/1": (80, 300), "s/t/0": (21, 600)}
    assert decision.left == Left(None, 0)
    assert decision.pieces["s/t/0"] == (SegmentRange("s/t/0", 1, 21),)


def test_steps_are_taken_while_they_fit_and_an_oversize_first_event_alone() -> None:
    steps = (plan("s/t/1", 0, 1, 500, 250), plan("s/t/1", 500, 1, 10, 260))
    alone = decide(two_segments(), [Measured("s/t/1", steps)], Left(None, 100), False)
    assert alone.reached == {"s/t/1": (500, 250)}  # the oversize event, and nothing after it
    after_others = decide(two_segments(), [Measured("s/t/1", steps)], Left(None, 100), True)
    assert after_others.reached == {} and after_others.left == Left(None, 100)
    both = decide(two_segments(), [Measured("s/t/1", steps[1:])], Left(1, None), False)
    assert both.reached == {"s/t/1": (510, 260)} and both.left == Left(0, None)


def test_a_probe_at_the_tail_takes_its_watermark_and_a_sealed_end_finishes_the_segment() -> None:
    successor = Successor("s/t/2", ("s/t/0",), 700)
    measured = [
        Measured("s/t/1", (plan("s/t/1", 0, 0, 0, 450, at_tail=True),), probe=True),
        Measured(
            "s/t/0", (plan("s/t/0", 1, 0, 0, 650, at_tail=True, end=True),), True, (successor,)
        ),
    ]
    decision = decide(two_segments(), measured, Left(0, None), planned_any=True)
    assert decision.reached == {"s/t/1": (0, 450), "s/t/0": (1, 650)}
    state, ends = apply(two_segments(), {}, decision)
    assert state.cursors["s/t/1"].watermark == 450
    assert "s/t/0" in state.finished and ends == {"s/t/0": 1}
    assert state.cursors["s/t/2"].offset == 0 and state.cursors["s/t/2"].watermark == 699


def test_a_segment_read_to_its_tail_is_not_measured_again_but_one_stopped_short_is() -> None:
    measured = [
        Measured("s/t/1", (plan("s/t/1", 0, 2, 20, 300, at_tail=True),)),
        Measured("s/t/0", (plan("s/t/0", 1, 2, 20, 600),)),
    ]
    decision = decide(two_segments(), measured, Left(10, None), planned_any=False)
    assert decision.again == {"s/t/0"}
