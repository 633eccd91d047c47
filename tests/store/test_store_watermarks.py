"""Watermark progression of the store on a synthetic clock, seen through a real gRPC server.

A segment watermark ``W`` after offset ``o`` promises that no event after ``o``
(nor in a successor) has an ingestion time at or before ``W`` (PDP 26).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.client import StoreClient, StreamManager
from connector.clock import ManualClock
from connector.framing import iter_frames
from connector.model import ReadResult
from connector.server import StoreServer

from . import frame_size, read_frames

pytestmark = pytest.mark.storages("file", "jetstream")

START = 1_700_000_000_000
LAG_MS = 10_000


def _new_stream(client: StoreClient, stream: str = "st", segments: int = 1) -> list[str]:
    manager = StreamManager(client)
    manager.create_scope("sc", exist_ok=True)
    description = manager.create_stream("sc", stream, segments)
    return [s.segment for s in description.segments]


def _append(client: StoreClient, segment: str, events: list[bytes], first: int = 0) -> int:
    """Appends as writer ``w``; returns the ingestion time."""
    return client.append(segment, "w", first, events).ingestion_time


def _tail(client: StoreClient, segment: str) -> ReadResult:
    return client.read(segment, client.segment_info(segment).write_offset)


def _parked_readers(server: StoreServer) -> int:
    """How many reads wait at a tail of the store (the parked-reads metric's value)."""
    return server.store.parked_reads


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="test-reader") as executor:
        yield executor


# --- creation and appends ---------------------------------------------------


def test_new_segment_starts_at_the_watermark_just_before_its_creation_time(
    store_client: StoreClient, clock: ManualClock
) -> None:
    clock.set(START + 42)
    segments = _new_stream(store_client, segments=2)

    for segment in segments:
        assert store_client.describe_stream("sc", "st").segment(segment).creation_time == START + 42
        read = store_client.read(segment, 0)
        assert (read.data, read.next_offset, read.watermark) == (b"", 0, START + 41)
        assert not read.end_of_segment
        info = store_client.segment_info(segment)
        assert (info.creation_time, info.last_write_time) == (START + 42, START + 42)
        assert (info.write_offset, info.watermark, info.sealed) == (0, START + 41, False)


def test_each_append_moves_the_watermark_after_its_data_to_its_ingestion_time_minus_one(
    store_client: StoreClient, clock: ManualClock
) -> None:
    [segment] = _new_stream(store_client)
    clock.advance(100)
    first = store_client.append(segment, "w", 0, [b"a", b"bb"])
    clock.advance(50)
    second = store_client.append(segment, "w", 2, [b"ccc"])

    assert (first.ingestion_time, second.ingestion_time) == (START + 100, START + 150)
    assert (first.appended, second.appended, second.duplicates) == (2, 1, 0)
    frames = read_frames(store_client, segment)
    assert [(f.payload, f.ingestion_time) for f in frames] == [
        (b"a", START + 100),
        (b"bb", START + 100),
        (b"ccc", START + 150),
    ]
    assert store_client.read(segment, 0, max_bytes=first.write_offset).watermark == START + 99
    assert store_client.read(segment, 0).watermark == START + 149
    info = store_client.segment_info(segment)
    assert (info.last_write_time, info.watermark) == (START + 150, START + 149)
    assert info.write_offset == second.write_offset == frames[-1].offset + frame_size(b"ccc")


def test_ingestion_times_strictly_increase_per_segment_when_the_clock_stalls_or_steps_back(
    store_client: StoreClient, clock: ManualClock
) -> None:
    left, right = _new_stream(store_client, segments=2)
    clock.advance(10)
    times = [_append(store_client, left, [b"0"], 0)]
    times.append(_append(store_client, left, [b"1"], 1))  # the clock stalls
    clock.advance(-5_000)  # the clock steps back
    times.append(_append(store_client, left, [b"2"], 2))
    clock.advance(5_000)  # back where it stalled
    times.append(_append(store_client, left, [b"3"], 3))
    clock.advance(7)
    times.append(_append(store_client, left, [b"4"], 4))

    assert times == [START + 10, START + 11, START + 12, START + 13, START + 17]
    assert [f.ingestion_time for f in read_frames(store_client, left)] == times
    frame = frame_size(b"0")
    watermarks = [store_client.read(left, 0, max_bytes=n * frame).watermark for n in range(1, 6)]
    assert watermarks == [t - 1 for t in times]
    # Another segment keeps its own sequence: the stalled clock is fine for its first append.
    assert _append(store_client, right, [b"r"]) == START + 17


# --- idle segments ----------------------------------------------------------


def test_idle_tick_comes_only_once_a_segment_is_idle_longer_than_the_lag(
    start_store: Callable[..., StoreServer], clock: ManualClock
) -> None:
    server = start_store(max_watermark_lag_ms=LAG_MS)
    client = StoreClient(server.uri, retry_timeout_s=2.0)
    [segment] = _new_stream(client)
    clock.advance(1)
    written = _append(client, segment, [b"x"])

    clock.advance(LAG_MS)  # idle exactly the lag: not longer
    assert server.store.advance_idle_segments() == 0
    assert _tail(client, segment).watermark == written - 1

    clock.advance(1)
    assert server.store.advance_idle_segments() == 1
    assert server.store.advance_idle_segments() == 0  # just ticked: not idle any more
    tick = written + LAG_MS + 1
    info = client.segment_info(segment)
    assert (info.last_write_time, info.watermark) == (tick, tick - 1)
    assert info.write_offset == frame_size(b"x")
    assert client.read(segment, 0).watermark == tick - 1  # the tick holds after the data too
    assert [f.ingestion_time for f in read_frames(client, segment)] == [written]
    client.close()


def test_sealed_segments_get_no_idle_tick(
    start_store: Callable[..., StoreServer], clock: ManualClock
) -> None:
    server = start_store(max_watermark_lag_ms=LAG_MS)
    client = StoreClient(server.uri, retry_timeout_s=2.0)
    [segment] = _new_stream(client)
    client.seal_stream("sc", "st")
    sealed_watermark = _tail(client, segment).watermark

    clock.advance(10 * LAG_MS)
    assert server.store.advance_idle_segments() == 0
    assert _tail(client, segment).watermark == sealed_watermark
    client.close()


def test_idle_advancer_ticks_idle_segments_by_itself_and_leaves_recent_ones_alone(
    start_store: Callable[..., StoreServer], clock: ManualClock, wait_until: Callable[..., object]
) -> None:
    server = start_store(max_watermark_lag_ms=LAG_MS, polling_period_ms=20)
    client = StoreClient(server.uri, retry_timeout_s=2.0)
    [early] = _new_stream(client, "early")
    clock.advance(LAG_MS // 2)
    [late] = _new_stream(client, "late")
    clock.advance(LAG_MS // 2 + 1)  # early: idle LAG + 1; late: idle LAG / 2 + 1

    wait_until(lambda: _tail(client, early).watermark == START + LAG_MS, what="early's idle tick")
    # The advancer pass that ticked `early` judged `late` at the same time: not idle long enough.
    assert _tail(client, late).watermark == START + LAG_MS // 2 - 1
    assert client.segment_info(late).last_write_time == START + LAG_MS // 2

    clock.advance(LAG_MS // 2)  # late: idle LAG + 1; early: idle LAG / 2 since its tick
    late_tick = START + LAG_MS + LAG_MS // 2 + 1
    wait_until(lambda: _tail(client, late).watermark == late_tick - 1, what="late's idle tick")
    assert _tail(client, early).watermark == START + LAG_MS
    client.close()


def test_concurrent_appends_land_whole_each_with_its_own_rising_ingestion_time(
    store_client: StoreClient,
) -> None:
    [segment] = _new_stream(store_client)
    writers, appends = 6, 30

    def write(writer: int) -> None:
        for n in range(appends):
            events = [f"{writer}:{n}:{i}".encode() for i in range(3)]
            store_client.append(segment, f"w{writer}", 3 * n, events)

    with ThreadPoolExecutor(max_workers=writers) as executor:
        for done in [executor.submit(write, w) for w in range(writers)]:
            done.result(timeout=30)

    frames = read_frames(store_client, segment)
    assert len(frames) == writers * appends * 3
    times = [f.ingestion_time for f in frames]
    assert len(set(times)) == writers * appends  # the stalled clock still gives each append a time
    assert times == sorted(times) and times[0] == START + 1
    for start in range(0, len(frames), 3):  # each append is contiguous: one writer, one time
        batch = [f.payload.decode().split(":") for f in frames[start : start + 3]]
        assert len({(w, n) for w, n, _ in batch}) == 1 and len(set(times[start : start + 3])) == 1
    for writer in range(writers):
        mine = [f.payload for f in frames if f.payload.startswith(f"{writer}:".encode())]
        assert mine == [f"{writer}:{n}:{i}".encode() for n in range(appends) for i in range(3)]


# --- sealing and scaling ----------------------------------------------------


def test_sealing_a_stream_ends_each_segment_without_successors(
    store_client: StoreClient, clock: ManualClock
) -> None:
    left, right = _new_stream(store_client, segments=2)
    clock.advance(5)
    written = _append(store_client, left, [b"a", b"b"])
    clock.advance(5)
    description = store_client.seal_stream("sc", "st")

    assert description.sealed
    assert all(s.sealed and s.successors == () for s in description.segments)
    full = store_client.read(left, 0)
    assert [f.payload for f in iter_frames(full.data)] == [b"a", b"b"]
    assert full.end_of_segment and full.successors == ()
    assert full.watermark == START + 9  # the seal is a temporal operation at START + 10
    assert full.watermark >= written - 1
    empty = store_client.read(right, 0, wait_ms=10_000)  # sealed: no waiting
    assert (empty.data, empty.end_of_segment, empty.watermark) == (b"", True, START + 9)
    assert store_client.segment_info(right).sealed


def test_split_successors_start_at_or_after_the_predecessors_final_watermark_on_a_stalled_clock(
    store_client: StoreClient, clock: ManualClock
) -> None:
    [segment] = _new_stream(store_client)
    clock.advance(10)
    written = _append(store_client, segment, [b"x"])
    # The clock stalls: the seal and the successors' creation still come strictly later.
    description = store_client.scale_stream("sc", "st", [0], 2)

    successors = ("sc/st/1", "sc/st/2")
    end = store_client.read(segment, 0)
    assert end.end_of_segment and end.successors == successors
    assert end.watermark >= written - 1
    assert description.segment(segment).successors == successors
    for name in successors:
        created = description.segment(name).creation_time
        assert created > written
        assert store_client.read(name, 0).watermark == created - 1
        assert created - 1 >= end.watermark
        assert _append(store_client, name, [b"y"]) > created


def test_merge_successor_starts_after_every_predecessor_even_when_the_clock_steps_back(
    store_client: StoreClient, clock: ManualClock
) -> None:
    _new_stream(store_client)
    store_client.scale_stream("sc", "st", [0], 2)
    clock.advance(100)
    left_time = _append(store_client, "sc/st/1", [b"l"])
    for first in range(3):  # the right segment runs ahead of the clock
        right_time = _append(store_client, "sc/st/2", [b"r"], first)
    clock.advance(-60_000)
    description = store_client.scale_stream("sc", "st", [1, 2], 0)

    finals = [store_client.read(name, 0).watermark for name in ("sc/st/1", "sc/st/2")]
    assert finals[0] >= left_time - 1 and finals[1] >= right_time - 1
    merged = description.segment("sc/st/3")
    assert merged.creation_time > max(left_time, right_time)
    assert store_client.read("sc/st/3", 0).watermark == merged.creation_time - 1 >= max(finals)


def test_split_and_merge_record_lineage_key_ranges_and_epochs(store_client: StoreClient) -> None:
    _new_stream(store_client)
    store_client.scale_stream("sc", "st", [0], 2)
    description = store_client.scale_stream("sc", "st", [1, 2], 0)

    assert description.epoch == 2
    shape = {
        s.segment: (s.key_low, s.key_high, s.epoch, s.sealed, s.predecessors, s.successors)
        for s in description.segments
    }
    assert shape == {
        "sc/st/0": (0.0, 1.0, 0, True, (), ("sc/st/1", "sc/st/2")),
        "sc/st/1": (0.0, 0.5, 1, True, ("sc/st/0",), ("sc/st/3",)),
        "sc/st/2": (0.5, 1.0, 1, True, ("sc/st/0",), ("sc/st/3",)),
        "sc/st/3": (0.0, 1.0, 2, False, ("sc/st/1", "sc/st/2"), ()),
    }
    assert [s.segment for s in description.open_segments] == ["sc/st/3"]
    assert store_client.read("sc/st/1", 0).successors == ("sc/st/3",)
    assert store_client.read("sc/st/2", 0).successors == ("sc/st/3",)


# --- tail reads -------------------------------------------------------------


def test_zero_length_tail_read_carries_the_current_watermark(
    store_server: StoreServer, store_client: StoreClient, clock: ManualClock
) -> None:
    [segment] = _new_stream(store_client)
    clock.advance(3)
    result = store_client.append(segment, "w", 0, [b"abc"])

    tail = store_client.read(segment, result.write_offset)
    assert (tail.offset, tail.next_offset, tail.data) == (result.write_offset,) * 2 + (b"",)
    assert tail.watermark == result.ingestion_time - 1
    clock.advance(LAG_MS + 1)
    assert store_server.store.advance_idle_segments() == 1
    assert store_client.read(segment, result.write_offset).watermark == START + LAG_MS + 3


def test_tail_read_returns_early_when_data_arrives(
    store_server: StoreServer,
    store_client: StoreClient,
    clock: ManualClock,
    pool: ThreadPoolExecutor,
    wait_until: Callable[..., object],
) -> None:
    [segment] = _new_stream(store_client)
    end = store_client.append(segment, "w", 0, [b"first"]).write_offset
    waiting: Future[ReadResult] = pool.submit(store_client.read, segment, end, 1024, 10_000)
    wait_until(lambda: _parked_readers(store_server) == 1, what="the read to park")

    clock.advance(1)
    triggered = time.monotonic()
    written = store_client.append(segment, "w", 1, [b"second"])
    result = waiting.result(timeout=5.0)

    assert time.monotonic() - triggered < 5.0  # far from the 10 s the read offered to wait
    assert [f.payload for f in iter_frames(result.data, end)] == [b"second"]
    assert (result.offset, result.next_offset) == (end, written.write_offset)
    assert result.watermark == written.ingestion_time - 1


def test_tail_read_returns_early_when_the_watermark_advances(
    store_server: StoreServer,
    store_client: StoreClient,
    clock: ManualClock,
    pool: ThreadPoolExecutor,
    wait_until: Callable[..., object],
) -> None:
    [segment] = _new_stream(store_client)
    waiting: Future[ReadResult] = pool.submit(store_client.read, segment, 0, 1024, 10_000)
    wait_until(lambda: _parked_readers(store_server) == 1, what="the read to park")

    clock.advance(LAG_MS + 1)
    triggered = time.monotonic()
    assert store_server.store.advance_idle_segments() == 1
    result = waiting.result(timeout=5.0)

    assert time.monotonic() - triggered < 5.0
    assert (result.data, result.next_offset, result.end_of_segment) == (b"", 0, False)
    assert result.watermark == START + LAG_MS


def test_tail_read_returns_early_when_the_segment_is_sealed(
    store_server: StoreServer,
    store_client: StoreClient,
    pool: ThreadPoolExecutor,
    wait_until: Callable[..., object],
) -> None:
    [segment] = _new_stream(store_client)
    waiting: Future[ReadResult] = pool.submit(store_client.read, segment, 0, 1024, 10_000)
    wait_until(lambda: _parked_readers(store_server) == 1, what="the read to park")

    store_client.scale_stream("sc", "st", [0], 2)
    result = waiting.result(timeout=5.0)

    assert result.end_of_segment and result.successors == ("sc/st/1", "sc/st/2")


def test_tail_read_with_a_known_watermark_below_the_current_one_returns_at_once(
    store_client: StoreClient, clock: ManualClock
) -> None:
    [segment] = _new_stream(store_client)
    clock.advance(8)
    end = store_client.append(segment, "w", 0, [b"x"]).write_offset

    began = time.monotonic()
    result = store_client.read(segment, end, wait_ms=10_000, known_watermark=START)
    assert time.monotonic() - began < 5.0
    assert (result.data, result.watermark) == (b"", START + 7)


# --- partial reads ----------------------------------------------------------


def test_read_with_a_small_max_bytes_returns_whole_events_only(store_client: StoreClient) -> None:
    [segment] = _new_stream(store_client)
    sizes = [100, 1, 0, 37, 250, 16, 16, 3, 90]
    events = [bytes([i]) * size for i, size in enumerate(sizes)]
    end = store_client.append(segment, "w", 0, events).write_offset

    first_two = frame_size(events[0]) + frame_size(events[1])
    two = store_client.read(segment, 0, max_bytes=first_two)
    assert [f.payload for f in iter_frames(two.data)] == events[:2]
    assert two.next_offset == len(two.data) == first_two
    tiny = store_client.read(segment, 0, max_bytes=1)  # smaller than one event: that event, whole
    assert [f.payload for f in iter_frames(tiny.data)] == events[:1]
    offset, seen = 0, []
    while offset < end:
        part = store_client.read(segment, offset, max_bytes=64)
        seen.extend(f.payload for f in iter_frames(part.data, offset))  # raises on a cut frame
        assert len(part.data) <= 64 or len(list(iter_frames(part.data))) == 1
        offset = part.next_offset
    assert seen == events


def test_watermark_after_a_read_ending_mid_batch_is_the_previous_batch_s(
    store_server: StoreServer, store_client: StoreClient, clock: ManualClock
) -> None:
    [segment] = _new_stream(store_client)
    frame = frame_size(b"a-00")
    clock.advance(10)
    first = store_client.append(segment, "w", 0, [b"a-00", b"a-01", b"a-02"])
    clock.advance(10)
    second = store_client.append(segment, "w", 3, [b"b-00", b"b-01", b"b-02"])

    inside_first = store_client.read(segment, 0, max_bytes=frame)
    assert (inside_first.next_offset, inside_first.watermark) == (frame, START - 1)
    inside_second = store_client.read(segment, first.write_offset, max_bytes=frame * 2)
    assert inside_second.next_offset == first.write_offset + frame * 2
    assert inside_second.watermark == first.ingestion_time - 1
    rest = store_client.read(segment, inside_second.next_offset)
    assert [f.payload for f in iter_frames(rest.data)] == [b"b-02"]
    assert rest.watermark == second.ingestion_time - 1

    # An idle tick between batches raises the watermark at the first batch's end only.
    clock.advance(LAG_MS + 1)
    assert store_server.store.advance_idle_segments() == 1
    tick = clock.now_ms()
    third = store_client.append(segment, "w", 6, [b"c-00", b"c-01"])
    inside_third = store_client.read(segment, second.write_offset, max_bytes=frame)
    assert inside_third.watermark == tick - 1 < third.ingestion_time - 1
    assert store_client.read(segment, 0, max_bytes=first.write_offset).watermark == START + 9


# --- the promise, over random histories ------------------------------------

_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.integers(-3_000, 3_000),
            st.lists(st.integers(0, 40), min_size=1, max_size=6),
        ),
        st.tuples(st.just("tick"), st.integers(LAG_MS + 1, 3 * LAG_MS), st.just([])),
    ),
    min_size=1,
    max_size=12,
)


def test_every_read_watermark_is_below_every_later_event_s_ingestion_time(
    store_server: StoreServer, store_client: StoreClient, clock: ManualClock
) -> None:
    streams = itertools.count()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(steps=_steps, budget=st.integers(1, 200))
    def check(steps: list[tuple[str, int, list[int]]], budget: int) -> None:
        [segment] = _new_stream(store_client, f"p{next(streams)}")
        number = 0
        for kind, step, sizes in steps:
            clock.advance(step)  # may stall or step back
            if kind == "tick":
                store_server.store.advance_idle_segments()
            else:
                events = [bytes([number % 256]) * size for size in sizes]
                store_client.append(segment, "w", number, events)
                number += len(events)
        frames = read_frames(store_client, segment)
        end = store_client.segment_info(segment).write_offset
        offset, previous, seen = 0, START - 1, []
        while offset < end:
            read = store_client.read(segment, offset, max_bytes=budget)
            assert read.next_offset > offset  # at least one whole event
            seen.extend(iter_frames(read.data, offset))
            later = [f.ingestion_time for f in frames if f.offset >= read.next_offset]
            assert all(read.watermark < t for t in later), (read.watermark, later)
            assert read.watermark >= previous  # never steps back along the segment
            previous, offset = read.watermark, read.next_offset
        assert seen == frames and len(frames) == number
        assert store_client.read(segment, end).watermark >= previous
        times = [f.ingestion_time for f in frames]
        assert times == sorted(times)

    check()
