"""The group's time kept change by change equals the group rule over the whole state."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from connector.groups.state import (
    INGESTION_WATERMARK,
    NO_WRITER,
    WRITERS_EVENT_TIME,
    GroupState,
    SegmentCursor,
    WaitingSegment,
    advance,
    group_event_time,
    group_watermark,
)
from connector.groups.tracking import GroupTimeTracker
from connector.timestamps import END_OF_TIME

_SEGMENTS = [f"s/t/{n}" for n in range(6)]
_times = st.integers(0, 5)
_event_times = st.one_of(st.none(), st.just(NO_WRITER), _times)


@st.composite
def _states(draw: st.DrawFn) -> GroupState:
    """States over a few segments with few values, so entries often stay equal."""
    cursors, waiting = {}, {}
    for segment in _SEGMENTS:
        place = draw(st.sampled_from(["cursor", "waiting", "finished"]))
        if place == "cursor":
            cursors[segment] = SegmentCursor(draw(_times), draw(_times), None, draw(_event_times))
        elif place == "waiting":
            waiting[segment] = WaitingSegment(draw(_times), frozenset({"x"}), draw(_event_times))
    return GroupState(cursors=cursors, waiting=waiting)


_operation = st.one_of(
    st.tuples(st.just("follow"), _states()),
    st.tuples(st.just("same"), st.none()),
    st.tuples(st.just("advance"), st.tuples(st.sampled_from(_SEGMENTS), _times, _event_times)),
    st.tuples(st.just("fresher"), st.tuples(st.sampled_from(_SEGMENTS), _times, _event_times)),
    st.tuples(st.just("drop"), st.sampled_from(_SEGMENTS)),
)


@settings(max_examples=150, deadline=None)
@given(_states(), st.lists(_operation, max_size=40))
def test_the_tracked_group_time_is_the_group_rule_after_any_history(
    start: GroupState, history: list[tuple[str, Any]]
) -> None:
    state = start
    watermarks: dict[str, int] = {}
    event_times: dict[str, int | None] = {}
    by_watermark = GroupTimeTracker(INGESTION_WATERMARK, state)
    by_event_time = GroupTimeTracker(WRITERS_EVENT_TIME, state)
    for kind, argument in history:
        if kind == "follow":
            state = argument
        elif kind == "advance" and argument[0] in state.cursors:
            segment, time, event_time = argument
            state = advance(state, segment, time, time, event_time)  # the others stay the same
        elif kind == "fresher":
            segment, time, event_time = argument
            watermarks[segment], event_times[segment] = time, event_time
            by_watermark.set_fresher(segment, time)
            by_event_time.set_fresher(segment, event_time)
        elif kind == "drop":
            watermarks.pop(argument, None)
            event_times.pop(argument, None)
            by_watermark.drop_fresher(argument)
            by_event_time.drop_fresher(argument)
        by_watermark.follow(state)
        by_event_time.follow(state)
        assert by_watermark.least() == group_watermark(state, watermarks), (kind, argument)
        assert by_event_time.least() == group_event_time(state, event_times), (kind, argument)


def test_a_done_group_and_an_unknown_event_time_read_as_the_rule_says() -> None:
    tracker = GroupTimeTracker(WRITERS_EVENT_TIME, GroupState())
    assert tracker.least() == END_OF_TIME
    tracker.follow(GroupState(cursors={"s/t/0": SegmentCursor(0, 5, None, None)}))
    assert tracker.least() is None  # not known: holds the group back
    tracker.set_fresher("s/t/0", 7)
    assert tracker.least() == 7
