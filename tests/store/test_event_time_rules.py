"""Properties of the store's event-time rules (seed 002), as pure functions over random histories.

A history is what the store sees of several writers on one segment:
assertions (some of them retried, some falling), idle marks, appends and
the store's idle timeouts, at rising ingestion times. Each property is
checked against a naive replay of the same history written out here.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import InvalidArgumentError
from connector.store.event_time import (
    WriterMark,
    after_append,
    after_assertion,
    after_idle,
    caught_up,
    decide_assertion,
    held_time,
    inherited_marks,
    silent_writers,
)
from connector.store.event_time_index import EventTimeIndex

WRITERS = ("a", "b", "c")
TIMEOUT_MS = 50

_step = st.one_of(
    st.tuples(st.just("assert"), st.sampled_from(WRITERS), st.integers(-20, 40)),
    st.tuples(st.just("retry"), st.sampled_from(WRITERS), st.just(0)),
    st.tuples(st.just("idle"), st.sampled_from(WRITERS), st.just(0)),
    st.tuples(st.just("append"), st.sampled_from(WRITERS), st.just(0)),
    st.tuples(st.just("wait"), st.just(""), st.integers(1, 80)),
    st.tuples(st.just("timeout"), st.just(""), st.just(0)),
)


@dataclass
class _Naive:
    """What each writer last did, replayed the obvious way."""

    asserted: dict[str, int]
    active: set[str]
    seen: dict[str, int]


@dataclass
class _Sent:
    number: int
    event_time: int | None


def _replay(history: list[tuple[str, str, int]]):
    """Applies ``history`` with the rules; yields (step, marks, naive, outcome) after each step."""
    marks: dict[str, WriterMark] = {}
    naive = _Naive({}, set(), {})
    numbers = dict.fromkeys(WRITERS, 0)
    sent: dict[str, list[_Sent]] = {w: [] for w in WRITERS}
    now = 1_000
    for step in history:
        kind, writer, value = step
        now += 1
        outcome = "applied"
        if kind in ("assert", "idle"):
            event_time = None if kind == "idle" else naive.asserted.get(writer, 100) + value
            number = numbers[writer]
            numbers[writer] += 1
            try:
                new = decide_assertion("stream s/t", writer, marks.get(writer), number, event_time)
            except InvalidArgumentError as error:
                outcome = f"refused: {error}"
            else:
                assert new, "a fresh number is never a duplicate"
                sent[writer].append(_Sent(number, event_time))
                if event_time is None:
                    marks = after_idle(marks, [writer], now, number)
                    naive.active.discard(writer)
                else:
                    marks = after_assertion(marks, writer, number, event_time, now)
                    naive.asserted[writer] = event_time
                    naive.active.add(writer)
                naive.seen[writer] = now
        elif kind == "retry":
            if not sent[writer]:
                continue
            old = sent[writer][value % len(sent[writer])]
            assert not decide_assertion(
                "stream s/t", writer, marks.get(writer), old.number, old.event_time
            ), "a number seen before is a duplicate"
            outcome = "duplicate"
        elif kind == "append":
            marks = dict(after_append(marks, writer, now))
            if writer in marks:
                naive.seen[writer] = now
        elif kind == "wait":
            now += value
        elif kind == "timeout":
            silent = silent_writers([marks], now, TIMEOUT_MS)
            expected = sorted(w for w in naive.active if now - naive.seen[w] > TIMEOUT_MS)
            assert silent == expected
            marks = after_idle(marks, silent, now)
            naive.active -= set(silent)
        yield step, marks, naive, outcome


@settings(max_examples=300, deadline=None)
@given(history=st.lists(_step, max_size=60))
def test_the_watermark_is_the_least_latest_assertion_of_the_active_writers(history) -> None:
    for _, marks, naive, _ in _replay(history):
        expected = min((naive.asserted[w] for w in naive.active), default=None)
        assert held_time(marks) == expected
        assert {w for w, m in marks.items() if m.active} == naive.active


@settings(max_examples=300, deadline=None)
@given(history=st.lists(_step, max_size=60))
def test_a_writers_assertions_never_fall_and_a_falling_one_changes_nothing(history) -> None:
    previous: dict[str, WriterMark] = {}
    for (kind, writer, value), marks, _, outcome in _replay(history):
        before = previous.get(writer)
        if outcome.startswith("refused"):
            assert kind == "assert" and value < 0
            assert f"asserted event time {before.event_time}" in outcome
            assert marks.get(writer) == before
        mark = marks.get(writer)
        if before and mark and before.event_time is not None:
            assert mark.event_time is not None and mark.event_time >= before.event_time
        previous = dict(marks)


@settings(max_examples=200, deadline=None)
@given(history=st.lists(_step, max_size=40), published_after=st.lists(st.integers(0, 3)))
def test_pending_marks_catch_up_to_the_same_marks_however_publishing_lags(
    history, published_after
) -> None:
    """A preparer stages each change's writers; publishing (or recovery) applies them later."""
    changes: list[tuple[dict[str, WriterMark], list[str]]] = []
    previous: dict[str, WriterMark] = {}
    for _, marks, _, _ in _replay(history):
        changed = [w for w in marks if marks[w] != previous.get(w)]
        if changed:
            changes.append((dict(marks), changed))
        previous = dict(marks)

    def publish(target: dict[str, WriterMark], applied: dict, changed: list[str]) -> None:
        for writer in changed:
            target[writer] = caught_up(target.get(writer), applied[writer])

    pending: dict[str, WriterMark] = {}
    staged: dict[str, WriterMark] = {}
    delays = iter(published_after)
    unpublished: list[tuple[dict[str, WriterMark], list[str]]] = []
    for marks, changed in changes:
        for writer in changed:  # staged by the preparer, ahead of what is durable
            pending[writer] = staged[writer] = marks[writer]
        unpublished.append((marks, changed))
        if next(delays, 0) == 0:
            for applied, touched in unpublished:
                publish(pending, applied, touched)
                assert pending == staged, "publishing an older change lost a newer staged one"
            unpublished.clear()
    for applied, touched in unpublished:
        publish(pending, applied, touched)
    recovered: dict[str, WriterMark] = {}  # recovery: nothing pending, every record applied
    for applied, touched in changes:
        publish(recovered, applied, touched)
    assert pending == previous
    assert recovered == previous


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.integers(0, 5), st.one_of(st.none(), st.integers(0, 9))), max_size=30
    ),
    initial=st.one_of(st.none(), st.integers(0, 9)),
)
def test_the_event_time_index_gives_the_last_value_recorded_at_or_before_a_position(
    entries, initial
) -> None:
    index = EventTimeIndex(initial)
    offset = -1
    naive: list[tuple[int, int | None]] = [(-1, initial)]
    for step, value in entries:
        offset += step
        index.record(offset, value)
        naive.append((offset, value))
    for end in range(offset + 3):
        expected = [v for o, v in naive if o <= end - 1][-1]
        assert index.time_after(end) == expected
    assert index.latest == naive[-1][1]
    offsets, times = index.entries()
    assert all(a < b for a, b in zip(offsets, offsets[1:], strict=False)), "strictly ascending"
    restored = EventTimeIndex.restored(offsets, times)
    assert [restored.time_after(e) for e in range(offset + 3)] == [
        index.time_after(e) for e in range(offset + 3)
    ]


@settings(max_examples=200, deadline=None)
@given(first=st.lists(_step, max_size=30), second=st.lists(_step, max_size=30))
def test_a_successor_starts_with_its_predecessors_writers_and_watermark(first, second) -> None:
    sides = []
    for history in (first, second):
        replayed = [marks for _, marks, _, _ in _replay(history)]
        sides.append(replayed[-1] if replayed else {})
    merged = inherited_marks(sides, 5_000)
    assert set(merged) == set(sides[0]) | set(sides[1])
    for writer, mark in merged.items():
        candidates = [s[writer] for s in sides if writer in s]
        assert mark.number == max(c.number for c in candidates)
        assert mark.since == 5_000
    if sides[0] == sides[1]:  # what a split (one predecessor's marks, twice) gives
        assert held_time(merged) == held_time(sides[0])


def test_an_assertion_below_the_writers_previous_one_is_refused_naming_both() -> None:
    marks = after_assertion({}, "sensor-c", 0, 1_000, 10)
    with pytest.raises(
        InvalidArgumentError, match=r"asserted event time 1000 .* 999 \(assertion 1"
    ):
        decide_assertion("stream iot/sensors", "sensor-c", marks["sensor-c"], 1, 999)
    idle = after_idle(marks, ["sensor-c"], 11, 1)
    with pytest.raises(InvalidArgumentError, match="1000"):
        decide_assertion("stream iot/sensors", "sensor-c", idle["sensor-c"], 2, 999)
    assert decide_assertion("stream iot/sensors", "sensor-c", idle["sensor-c"], 2, 1_000)


def test_a_timeout_of_zero_never_marks_a_writer_idle() -> None:
    marks = after_assertion({}, "w", 0, 5, 10)
    assert silent_writers([marks], 10**12, 0) == []
    assert silent_writers([marks], 10**12, 1) == ["w"]
