"""A batch's read tasks: cut into more pieces (``spread``) and read with the reads ahead.

``spread`` and ``read_columns`` run against a real store server; ``read_ahead``
alone runs on plain iterators.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from connector.client import EventWriter, StoreClient, StringSerializer, connection, key_position
from connector.errors import DataLossError
from connector.framing import iter_frames
from connector.model import ReadResult
from connector.reader.source import ReadTask, SegmentRange, read_columns
from connector.reader.source.read_ahead import read_ahead
from connector.reader.source.tasks import piece_counts, spread
from connector.reader.source.timekeeping import ProcessingTime
from tests.conftest import new_stream_in
from tests.probes import flip_stored_bit


def write(client: StoreClient, segments: int, per_segment: list[int]) -> list[SegmentRange]:
    """A stream of ``segments`` segments holding ``per_segment[i]`` events in segment ``i``.

    Each event is its own number as text, in appends of 50; returns each
    segment's whole range.
    """
    stream = new_stream_in(client, segments, scope="tasks")
    keys = [_key_in(i / segments, (i + 1) / segments) for i in range(segments)]
    with EventWriter(client, stream, StringSerializer()) as writer:
        n = 0
        for i, count in enumerate(per_segment):
            for _ in range(count):
                writer.write_event(f"{n:08d}", routing_key=keys[i])
                n += 1
                if n % 50 == 0:
                    writer.flush()
    return [
        SegmentRange(f"{stream}/{i}", 0, client.segment_info(f"{stream}/{i}").write_offset)
        for i in range(segments)
    ]


def _key_in(low: float, high: float) -> str:
    """A routing key whose position lies in ``[low, high)``: one of the segment owning that."""
    return next(k for k in (f"k{n}" for n in range(10_000)) if low <= key_position(k) < high)


def events_of(client: StoreClient, tasks: tuple[ReadTask, ...]) -> list[bytes]:
    """Every event the tasks read, task by task, as read with no read ahead."""
    return [
        payload
        for task in tasks
        for part in read_columns(client, task, ProcessingTime(), "string")
        for payload in part.payloads
    ]


def test_piece_counts_follow_each_range_s_share_and_keep_small_ranges_whole() -> None:
    assert piece_counts([900, 300], at_least=4, min_piece_bytes=100) == [3, 1]
    assert piece_counts([600, 600], at_least=2, min_piece_bytes=100) == [1, 1]
    assert piece_counts([600], at_least=3, min_piece_bytes=250) == [2]  # none under 250 bytes
    assert piece_counts([100], at_least=8, min_piece_bytes=100) == [1]
    assert piece_counts([], at_least=2) == []


def test_spread_cuts_ranges_into_whole_events_of_about_equal_bytes_each_event_once(
    store_client: StoreClient,
) -> None:
    whole = write(store_client, 2, [300, 100])
    tasks = (ReadTask(0, (whole[0],), 17), ReadTask(1, (whole[1],), 17))

    spread_tasks = spread(store_client, tasks, at_least=4, min_piece_bytes=64)

    assert [(t.ranges[0].segment, t.lane) for t in spread_tasks] == [
        (whole[0].segment, 0),
        (whole[0].segment, 0),
        (whole[0].segment, 0),
        (whole[1].segment, 1),
    ]
    assert all(t.watermark_in_force == 17 and len(t.ranges) == 1 for t in spread_tasks)
    first = [t.ranges[0] for t in spread_tasks[:3]]
    assert first[0].start == 0 and first[-1].stop == whole[0].stop
    assert all(a.stop == b.start for a, b in zip(first, first[1:], strict=False))
    sizes = [r.stop - r.start for r in first]
    frame = whole[0].stop // 300
    assert max(sizes) - min(sizes) <= frame, sizes
    assert events_of(store_client, spread_tasks) == events_of(store_client, tasks)
    assert spread(store_client, tasks, at_least=1, min_piece_bytes=64) == tasks
    assert spread(store_client, tasks, at_least=4) == tasks  # under 1 MiB: kept whole


@pytest.mark.parametrize("ahead", [1, 2])
def test_reads_ahead_deliver_every_event_once_in_order_as_reads_in_turn_do(
    store_client: StoreClient, ahead: int
) -> None:
    (whole,) = write(store_client, 1, [500])
    task = ReadTask(0, (whole,))
    in_turn = list(read_columns(store_client, task, ProcessingTime(), "string", 1024))
    ahead_parts = list(read_columns(store_client, task, ProcessingTime(), "string", 1024, ahead))
    assert len(in_turn) > 5  # many reads: the reads ahead had something to do
    assert ahead_parts == in_turn
    assert [p for part in ahead_parts for p in part.payloads] == [
        f"{n:08d}".encode() for n in range(500)
    ]


def test_reads_ahead_raise_data_loss_after_every_event_before_the_damage(
    store_server: Any, store_client: StoreClient
) -> None:
    (whole,) = write(store_client, 1, [200])
    frames = list(iter_frames(store_client.read(whole.segment, 0, 1 << 20).data))
    flip_stored_bit(store_server, whole.segment, frames[120].end - 1)
    got: list[bytes] = []
    columns = read_columns(
        store_client, ReadTask(0, (whole,)), ProcessingTime(), "string", 512, ahead=2
    )
    with pytest.raises(DataLossError, match=f"at offset {frames[120].offset}"):
        for part in columns:
            got.extend(part.payloads)
    assert got == [f"{n:08d}".encode() for n in range(120)]


def test_an_answer_damaged_on_its_way_from_the_store_is_data_loss_at_its_event(
    store_client: StoreClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    (whole,) = write(store_client, 1, [200])
    frames = list(iter_frames(store_client.read(whole.segment, 0, 1 << 20).data))
    damaged = frames[120]
    answered = connection.read_result
    starts: list[int] = []

    def damaged_on_its_way(message: Any) -> ReadResult:
        assert message.data_crc32 == zlib.crc32(message.data)  # the store checked it all
        if message.offset <= damaged.offset < message.next_offset:
            starts.append(message.offset)
            data = bytearray(message.data)
            data[damaged.end - 1 - message.offset] ^= 0x01  # after the store's checks
            message.data = bytes(data)
        return answered(message)

    monkeypatch.setattr(connection, "read_result", damaged_on_its_way)
    got: list[bytes] = []
    columns = read_columns(
        store_client, ReadTask(0, (whole,)), ProcessingTime(), "string", 512, ahead=2
    )
    with pytest.raises(DataLossError, match=f"at offset {damaged.offset}") as loss:
        for part in columns:
            got.extend(part.payloads)
    assert loss.value.offset == damaged.offset
    (start,) = starts
    assert got == [frame.payload for frame in frames if frame.offset < start]


def _numbers(count: int, produced: list[int], fail_at: int | None = None) -> Iterator[int]:
    for n in range(count):
        if n == fail_at:
            msg = f"failed at {n}"
            raise RuntimeError(msg)
        produced.append(n)
        yield n


def test_read_ahead_yields_in_order_then_raises_where_the_source_failed() -> None:
    produced: list[int] = []
    assert list(read_ahead(_numbers(100, produced), depth=3)) == list(range(100))
    got = []
    with pytest.raises(RuntimeError, match="failed at 7"):
        for n in read_ahead(_numbers(100, [], fail_at=7), depth=2):
            got.append(n)
    assert got == list(range(7))
    with pytest.raises(ValueError, match="depth of at least 1, got 0"):
        next(read_ahead(iter([1]), depth=0))


def test_read_ahead_closed_early_stops_its_thread_and_closes_the_source() -> None:
    produced: list[int] = []
    closed = threading.Event()

    def source() -> Iterator[int]:
        try:
            yield from _numbers(1_000_000, produced)
        finally:
            closed.set()

    before = threading.active_count()
    reading = read_ahead(source(), depth=2)
    assert [next(reading) for _ in range(3)] == [0, 1, 2]
    reading.close()
    assert closed.is_set()
    assert threading.active_count() == before
    assert len(produced) <= 3 + 2 + 1  # taken, queued, and the one in hand
