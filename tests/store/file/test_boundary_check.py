"""A read at an offset inside an event is refused after reading a bounded window of data."""

from __future__ import annotations

import pathlib
import random

import pytest

from connector.clock import ManualClock
from connector.errors import InvalidArgumentError
from connector.framing import HEADER, encode_frames, iter_frames, lands_on_boundary
from connector.store import SegmentStore, StoreConfig
from connector.store.boundaries import STRIDE, checkpoints
from connector.store.file.segment import Segment

EVENT = 200
FRAME = HEADER.size + 2 + EVENT
EVENTS = 40_000  # 8.7 MB in one append: 33 strides


@pytest.mark.parametrize("keyed", [False, True])
def test_checkpoints_are_frame_ends_less_than_a_stride_apart(keyed):
    rng = random.Random(5)
    payloads = [rng.randbytes(rng.choice((0, 1, 50, 3_000, 70_000))) for _ in range(400)]
    keys = [rng.choice(("", "k", "名前")) for _ in payloads] if keyed else None
    start = 1_234
    data = encode_frames(payloads, 7, keys)
    ends = [frame.end for frame in iter_frames(data, base_offset=start)]
    found = checkpoints(start, payloads, keys, stride=10_000)
    assert found and set(found) <= set(ends[:-1])
    known = [start, *found, ends[-1]]
    for low, high in zip(known, known[1:], strict=False):
        inside = [end for end in ends if low < end < high]
        assert all(end - low < 10_000 for end in inside), (low, high)


def test_no_checkpoints_in_an_append_under_a_stride():
    assert checkpoints(0, [b"x" * 100] * 100) == []


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every byte read from a segment's data file (the store's file layer)."""
    counted: list[int] = []
    read_bytes = Segment.read_bytes

    def counting(segment: Segment, start: int, stop: int) -> bytes:
        data = read_bytes(segment, start, stop)
        counted.append(len(data))
        return data

    monkeypatch.setattr(Segment, "read_bytes", counting)
    return counted


def _refused_reading(store: SegmentStore, offset: int, counted: list[int]) -> int:
    counted.clear()
    with pytest.raises(InvalidArgumentError, match="not at an event boundary"):
        store.read("b/s/0", offset, max_bytes=1)
    return sum(counted)


def test_an_offset_deep_inside_a_large_append_is_refused_reading_at_most_a_stride(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
):
    clock = ManualClock(1_000)
    config = StoreConfig(
        str(tmp_path / "data"), clock=clock, polling_period_ms=None, compact_after_records=2
    )
    store = SegmentStore(config)
    store.create_scope("b")
    store.create_stream("b", "s", 1)
    store.append("b/s/0", "w", 0, [bytes([n % 251]) * EVENT for n in range(EVENTS)])
    counted = _counting_reads(monkeypatch)
    bound = STRIDE + HEADER.size
    last_event = (EVENTS - 1) * FRAME  # the farthest boundary from the append's start
    far_inside = [last_event + 1, last_event - 5, EVENTS // 2 * FRAME + 17]

    assert max(_refused_reading(store, o, counted) for o in far_inside) <= bound
    counted.clear()
    result = store.read("b/s/0", last_event, max_bytes=1)  # a real boundary is served
    assert result.next_offset == EVENTS * FRAME and sum(counted) <= bound + FRAME

    store.close()  # compacted into a snapshot at the next start, then replayed from it
    for restart in range(2):
        store = SegmentStore(config)
        assert max(_refused_reading(store, o, counted) for o in far_inside) <= bound
        assert store.read("b/s/0", last_event, max_bytes=1).next_offset == EVENTS * FRAME
        store.create_scope(
            f"more{restart}"
        )  # a record past the snapshot, so the next start compacts
        store.close()


def test_the_walk_from_a_boundary_decides_every_offset_of_a_small_segment():
    data = encode_frames([b"a", b"", b"bcd" * 1000, b"e"], 3)
    ends = {0} | {frame.end for frame in iter_frames(data)}

    def read(start: int, stop: int) -> bytes:
        return data[start:stop]

    landed = [o for o in range(len(data) + 1) if lands_on_boundary(read, 0, o, STRIDE)]
    assert landed == sorted(ends)
