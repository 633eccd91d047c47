"""The store plans a read under a budget from its index: the boundary after N events or B bytes."""

from __future__ import annotations

import pathlib
import random

import pytest

from connector.clock import ManualClock
from connector.errors import InvalidArgumentError
from connector.framing import iter_frames
from connector.store import SegmentStore, StoreConfig
from connector.store.file.segment import Segment

SEGMENT = "p/s/0"


def _store(data_dir: pathlib.Path, clock: ManualClock) -> SegmentStore:
    store = SegmentStore(StoreConfig(data_dir=str(data_dir), clock=clock, polling_period_ms=None))
    store.create_scope("p")
    store.create_stream("p", "s")
    return store


def _fill(store: SegmentStore, clock: ManualClock, rng: random.Random) -> None:
    """Appends of 1 to 300 events of 0 to 3,000 bytes (and a few of 400 KB), ticks between."""
    number = 0
    for _ in range(40):
        count = rng.choice((1, 2, 7, 60, 300))
        sizes = [rng.choice((0, 10, 100, 3_000)) for _ in range(count)]
        if rng.random() < 0.1:
            sizes[rng.randrange(count)] = 400_000
        store.append(SEGMENT, "w", number, [rng.randbytes(n) for n in sizes])
        number += count
        clock.advance(5)
        if rng.random() < 0.3:
            store.advance_idle_segments()
            clock.advance(5)


def _expected(store: SegmentStore, offset: int, max_events: int | None, max_bytes: int | None):
    """The reference: walk every frame from ``offset`` (what the reader used to do)."""
    end = store.segment_info(SEGMENT).write_offset
    data = store.read(SEGMENT, offset, max_bytes=end - offset + 1).data if offset < end else b""
    frames = list(iter_frames(data, offset))
    taken = []
    for frame in frames:
        if max_events is not None and len(taken) >= max_events:
            break
        if max_bytes is not None and frame.end - offset > max_bytes:
            break
        taken.append(frame)
    if frames and not taken:
        taken = frames[:1]
    return (taken[-1].end if taken else offset), len(taken), frames


@pytest.mark.parametrize("seed", range(3))
def test_plan_matches_a_walk_over_the_frames(tmp_path, clock, seed):
    rng = random.Random(seed)
    store = _store(tmp_path / "data", clock)
    try:
        _fill(store, clock, rng)
        end = store.segment_info(SEGMENT).write_offset
        starts = [frame.offset for frame in iter_frames(store.read(SEGMENT, 0, end).data, 0)]
        for _ in range(300):
            offset = rng.choice([*starts, end])
            max_events = rng.choice((None, 1, 3, 50, 400, 5_000))
            max_bytes = rng.choice((None, 1, 500, 20_000, 300_000, 2_000_000))
            if max_events is None and max_bytes is None:
                max_events = 10
            stop, events, frames = _expected(store, offset, max_events, max_bytes)
            plan = store.plan_read(SEGMENT, offset, max_events, max_bytes)
            assert (plan.next_offset, plan.events) == (stop, events), (
                offset,
                max_events,
                max_bytes,
            )
            assert plan.at_tail == (stop == end)
            # The watermark is the read's at the tail and never promises more than it may.
            if stop == end:
                assert plan.watermark == store.segment_info(SEGMENT).watermark
            elif events:
                after = next(f for f in frames if f.offset == stop)
                assert plan.watermark < after.ingestion_time
    finally:
        store.close()


def test_whole_appends_are_a_lookup_and_partial_ones_a_bounded_walk(tmp_path, clock, monkeypatch):
    store = _store(tmp_path / "data", clock)
    try:
        for i in range(1_000):  # 1,000 appends of 100 events of 100 bytes
            store.append(SEGMENT, "w", i * 100, [b"x" * 100] * 100)
            clock.advance(1)
        read = []
        read_bytes = Segment.read_bytes

        def counting(segment, start, stop):
            data = read_bytes(segment, start, stop)
            read.append(len(data))
            return data

        monkeypatch.setattr(Segment, "read_bytes", counting)
        plan = store.plan_read(SEGMENT, 0, max_events=50_050)
        assert plan.events == 50_050
        # Only the partial last append (50 events, 5.9 KB) was walked, not 5.9 MB.
        assert sum(read) < 20_000
        read.clear()
        again = store.plan_read(SEGMENT, plan.next_offset, max_events=10_000, max_bytes=10**9)
        assert again.events == 10_000
        assert sum(read) < 20_000
    finally:
        store.close()


def test_counts_survive_a_restart_and_a_compaction(tmp_path, clock):
    store = _store(tmp_path / "data", clock)
    for i in range(20):
        store.append(SEGMENT, "w", i * 10, [b"y" * 10] * 10)
    first = store.plan_read(SEGMENT, 0, max_events=95)
    store.close()
    with SegmentStore(StoreConfig(data_dir=str(tmp_path / "data"), clock=clock)) as again:
        assert again.plan_read(SEGMENT, 0, max_events=95) == first
        seg = again.engine.segment(SEGMENT)
        assert seg.counted_boundary_at_or_after(0) is not None  # the counts are known


def test_bad_limits_and_offsets_are_refused_naming_them(tmp_path, clock):
    store = _store(tmp_path / "data", clock)
    try:
        store.append(SEGMENT, "w", 0, [b"z" * 10] * 3)
        with pytest.raises(InvalidArgumentError, match="max_events must be > 0 or None, got 0"):
            store.plan_read(SEGMENT, 0, max_events=0)
        with pytest.raises(InvalidArgumentError, match="not at an event boundary"):
            store.plan_read(SEGMENT, 5, max_events=1)
        with pytest.raises(InvalidArgumentError, match="outside segment"):
            store.plan_read(SEGMENT, 10_000, max_events=1)
    finally:
        store.close()
