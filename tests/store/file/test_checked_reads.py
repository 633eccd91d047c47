"""Every frame a read serves is checked, whether or not the read ends where an append ends.

A read that ends inside an append finds its last whole event and checks the
events before it in one pass over the bytes; a read that ends at an append's
end checks the events up to it. Either way a flipped bit anywhere in an
append (a header, a routing key, a payload) is served as the intact events
before the damaged one, then DATA_LOSS at the damaged one.
"""

from __future__ import annotations

import pathlib
import zlib

import pytest

from connector.clock import ManualClock
from connector.errors import DataLossError
from connector.framing import iter_frames
from connector.store import SegmentStore, StoreConfig

SEGMENT = "c/s/0"
#: Events of unequal sizes, keyed and not, so frames cross the reads' limits unevenly.
PAYLOADS = [bytes([65 + n]) * (3 + 7 * (n % 4)) for n in range(9)]
KEYS = ["" if n % 3 == 0 else f"key{n}" for n in range(9)]


@pytest.fixture(name="store")
def _store(tmp_path: pathlib.Path):
    config = StoreConfig(str(tmp_path / "data"), clock=ManualClock(1_000), polling_period_ms=None)
    store = SegmentStore(config)
    store.create_scope("c")
    store.create_stream("c", "s", 1)
    store.append(SEGMENT, "w", 0, PAYLOADS, routing_keys=KEYS)
    store.append(SEGMENT, "w", len(PAYLOADS), [b"after"])  # an append after the damaged one
    yield store
    store.close()


def _read_all(store: SegmentStore, max_bytes: int) -> tuple[list[bytes], DataLossError | None]:
    """Every payload served from 0 on, read by read, and the DATA_LOSS that stopped it (or None)."""
    served: list[bytes] = []
    offset = 0
    end = store.segment_info(SEGMENT).write_offset
    while offset < end:
        try:
            result = store.read(SEGMENT, offset, max_bytes=max_bytes)
        except DataLossError as loss:
            return served, loss
        assert result.checksum == zlib.crc32(result.data)
        served.extend(frame.payload for frame in iter_frames(result.data, offset))
        offset = result.next_offset
    return served, None


def _flip(store: SegmentStore, position: int) -> None:
    path = store.engine.segment(SEGMENT).data_path
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ 0x04]))


@pytest.mark.parametrize("max_bytes", [40, 97, 1 << 20])
def test_a_flipped_bit_anywhere_in_an_append_is_data_loss_at_its_event(
    store: SegmentStore, max_bytes: int
) -> None:
    whole = store.read(SEGMENT, 0, max_bytes=1 << 20)
    frames = list(iter_frames(whole.data))
    append_end = frames[len(PAYLOADS)].offset
    assert _read_all(store, max_bytes) == ([*PAYLOADS, b"after"], None)
    for position in range(append_end):
        _flip(store, position)
        hit = max(i for i, frame in enumerate(frames) if frame.offset <= position)
        served, loss = _read_all(store, max_bytes)
        _flip(store, position)
        assert served == PAYLOADS[:hit], position
        assert loss is not None, position
        assert (loss.segment, loss.offset) == (SEGMENT, frames[hit].offset), position
        assert loss.next_offset == append_end, position
