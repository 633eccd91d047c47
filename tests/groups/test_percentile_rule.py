"""The percentile watermark's rule, over plain values: exact answers and properties."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.errors import InvalidArgumentError
from connector.groups.percentile import (
    ingestion_percentile,
    percentile_time,
    writers_percentile,
)
from connector.groups.state import GroupState
from connector.model import TimeCount, UnreadWork
from connector.reader import ReaderConfig, TimeDomain
from connector.reader.source.timekeeping import TimeKeeping
from connector.timestamps import END_OF_TIME

_items = st.lists(
    st.builds(TimeCount, st.integers(0, 1_000), st.integers(0, 20)), min_size=1, max_size=30
)
_p = st.floats(0.01, 1.0)


def _work(unread=(), writers=(), tail=10_000) -> UnreadWork:
    return UnreadWork(
        tuple(TimeCount(t, c) for t, c in unread),
        tuple(TimeCount(t, c) for t, c in writers),
        tail,
    )


def test_ingestion_percentile_of_a_hand_made_group() -> None:
    # Segment a: a straggler, 2 unread events before which its watermark was 100.
    # Segment b: 18 unread events, 9 after 500 and 9 after 600. Segment c: caught up at 900.
    work = [
        _work(unread=[(100, 2)], tail=950),
        _work(unread=[(500, 9), (600, 9)], tail=700),
        _work(tail=900),
    ]
    assert ingestion_percentile(work, 1.0) == 100  # the perfect watermark: a's position
    assert ingestion_percentile(work, 0.9) == 500  # 18 of 20 lie after 500
    assert ingestion_percentile(work, 0.5) == 500  # 10 needed: 9 after 600 are too few
    assert ingestion_percentile(work, 0.45) == 600  # 9 of 20 lie after 600
    # Never past a tail: segment c's next event may be ingested right after 550.
    work[2] = _work(tail=550)
    assert ingestion_percentile(work, 0.45) == 550


def test_writers_percentile_of_a_hand_made_group() -> None:
    # Ten writers, each asserting on both segments (as a writer does on every open
    # segment); one straggles at 10 in both. The others' events wait unread in a,
    # so they hold 1000 there and 1100 in b.
    work = [
        _work(writers=[(10, 1), (1_000, 9)]),
        _work(writers=[(10, 1), (1_100, 9)]),
    ]
    assert writers_percentile(work, 1.0) == 10
    assert writers_percentile(work, 0.9) == 10  # the straggler's two entries use up 2 of 1
    assert writers_percentile(work, 0.8) == 1_000  # 8 of 10 lie after 1000 in both
    assert writers_percentile(work, 0.5) == 1_000  # every writer's entry in a holds 1000


def test_writers_percentile_counts_a_writer_once_not_once_per_segment() -> None:
    # Forty writers on eight segments, each asserting on all of them; two straggle.
    # A straggler's newer assertion (-29800) is read in the seven segments it only
    # asserts on, while in its own its event at -29800 still waits behind -29900:
    # at p = 0.99, ceil(0.99 * 40) = 40 writers must lie after W, so W is -29900
    # (counting 320 entries would let 3 fall below and put W at -29800, making
    # the waiting event late).
    own = _work(writers=[(-29_900, 1), (-29_800, 1), (-400, 38)])
    others = [_work(writers=[(-29_800, 2), (-400, 38)]) for _ in range(6)]
    last = _work(writers=[(-29_900, 1), (-29_800, 1), (-400, 38)])
    work = [own, *others, last]
    assert writers_percentile(work, 0.99) == -29_900
    assert writers_percentile(work, 0.99) == writers_percentile(work, 1.0)
    # 16 straggling entries fit in the allowance of 40 - ceil(0.5 * 40) = 20.
    assert writers_percentile(work, 0.5) == -400

    assert writers_percentile([_work()], 0.9) == END_OF_TIME  # no writer active


@given(items=_items, p=_p)
def test_percentile_time_is_the_greatest_time_a_fraction_p_lies_at_or_after(items, p) -> None:
    total = sum(i.count for i in items)
    got = percentile_time(items, p)
    if total == 0:
        assert got is None
        return
    needed = max(1, math.ceil(p * total - 1e-9))
    at_or_after = sum(i.count for i in items if i.time >= got)
    assert at_or_after >= needed
    above = sum(i.count for i in items if i.time > got)
    assert above < needed  # no greater time would do


@given(items=_items, p=_p, q=_p)
def test_a_lower_percentile_never_gives_an_earlier_time(items, p, q) -> None:
    low, high = sorted((p, q))
    if sum(i.count for i in items):
        assert percentile_time(items, low) >= percentile_time(items, high)


@given(items=_items)
def test_percentile_one_is_the_least_time(items) -> None:
    counted = [i.time for i in items if i.count]
    assert percentile_time(items, 1.0) == (min(counted) if counted else None)


@pytest.mark.parametrize("p", [0.5, 0.9, 0.99])
def test_the_late_fraction_matches_p_on_a_known_distribution(p: float) -> None:
    """Events uniform over 10,000 ms: the share behind the watermark is 1 - p, to a bucket."""
    rng = random.Random(7)
    holds = [rng.randrange(10_000) for _ in range(20_000)]
    watermark = percentile_time([TimeCount(h, 1) for h in holds], p)
    late = sum(h < watermark for h in holds) / len(holds)
    assert late <= 1 - p + 1e-9
    assert late >= 1 - p - 0.01  # and not far below: it does pass the oldest 1 - p


@given(
    holds=st.lists(st.integers(0, 1_000), min_size=1, max_size=20),
    p=_p,
    lag=st.integers(0, 50),
)
def test_time_keeping_at_a_percentile_never_falls_below_the_perfect_one(holds, p, lag) -> None:
    time = TimeKeeping.of(TimeDomain.INGESTION_TIME, lag_ms=lag, percentile=p)
    state = GroupState.starting_at({"s/t/0": 0}, {"s/t/0": min(holds)})
    work = [_work(unread=[(h, 1) for h in holds], tail=2_000)]
    perfect = min(holds) - lag
    watermark = time.watermark(state, work=work)
    assert watermark >= perfect
    assert watermark == percentile_time(work[0].unread, p) - lag
    at_one = TimeKeeping.of(TimeDomain.INGESTION_TIME, lag_ms=lag, percentile=1.0)
    assert at_one.watermark(state, work=work) == perfect


@pytest.mark.parametrize("bad", [0, 0.0, -0.5, 1.5, float("nan"), "0.9", True])
def test_a_bad_percentile_is_refused_naming_it(bad) -> None:
    with pytest.raises(InvalidArgumentError, match="watermark_percentile") as refused:
        ReaderConfig(time_domain=TimeDomain.INGESTION_TIME, watermark_percentile=bad)
    assert repr(bad) in str(refused.value)


def test_a_percentile_in_the_processing_time_domain_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="0.9"):
        TimeKeeping.of(TimeDomain.PROCESSING_TIME, percentile=0.9)
