"""Durability: an acknowledged append survives kill -9; torn tails are cut at restart."""

from __future__ import annotations

import os
import pathlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from connector.client import StoreClient
from connector.clock import ManualClock
from connector.errors import InvalidArgumentError, TidemarkError
from connector.framing import encode_frames, iter_frames
from connector.model import AppendResult
from connector.server import StoreServer
from tests.store import frame_size, payloads, read_frames

WRITER = "durable-writer"
BATCH = 5
#: Idle ticks would change LAST_WRITE_TIME under the test's feet; push them out of reach.
NO_TICKS = ("--max-watermark-lag-ms", "600000")


@dataclass(frozen=True)
class Batch:
    """One append: where it went, its writer numbers and events."""

    segment: str
    first: int
    events: list[bytes]


@dataclass
class Writer:
    """Appends batches round-robin to some segments until an append fails.

    Records every acknowledged batch with its result, and the batch in flight
    when the store went away.
    """

    uri: str
    segments: list[str]
    acked: list[tuple[Batch, AppendResult]] = field(default_factory=list)
    in_flight: Batch | None = None
    failure: BaseException | None = None

    def run(self) -> None:
        # No retrying: the first unanswered append is the one in flight at the crash.
        client = StoreClient(self.uri, retry_timeout_s=0.0, call_timeout_s=10.0)
        numbers = dict.fromkeys(self.segments, 0)
        try:
            for turn in range(1_000_000):
                segment = self.segments[turn % len(self.segments)]
                first = numbers[segment]
                events = [f"{segment}#{first + i}".encode() for i in range(BATCH)]
                batch = Batch(segment, first, events)
                self.in_flight = batch
                result = client.append(segment, WRITER, first, events)
                self.in_flight = None
                self.acked.append((batch, result))
                numbers[segment] = first + BATCH
        except TidemarkError as error:
            self.failure = error
        finally:
            client.close()

    def acked_events(self, segment: str) -> list[bytes]:
        return [e for batch, _ in self.acked if batch.segment == segment for e in batch.events]


@pytest.mark.slow
def test_kill_minus_nine_mid_stream_keeps_every_acknowledged_event_exactly_once_in_order(
    spawn_server: Callable[..., object], data_dir: pathlib.Path, wait_until: Callable[..., object]
) -> None:
    first_server = spawn_server(data_dir, *NO_TICKS)
    with StoreClient(first_server.uri, retry_timeout_s=5.0) as setup:
        setup.create_scope("sc")
        described = setup.create_stream("sc", "st", 2)
        setup.create_stream("sc", "quiet", 1)
        setup.append("sc/quiet/0", "q", 0, [b"q0", b"q1"])
        setup.append("sc/quiet/0", "q", 2, [b"q2"])
        quiet_before = setup.segment_info("sc/quiet/0")
    segments = [s.segment for s in described.segments]
    writer = Writer(first_server.uri, segments)
    thread = threading.Thread(target=writer.run, name="durable-writer")
    thread.start()
    wait_until(lambda: len(writer.acked) >= 40, timeout=30.0, what="40 acknowledged batches")

    first_server.process.kill()
    assert first_server.process.wait(timeout=10) == -9
    wait_until(lambda: not thread.is_alive(), timeout=10.0, what="the writer to notice the crash")
    assert writer.failure is not None and writer.in_flight is not None

    server = spawn_server(data_dir, *NO_TICKS)
    client = StoreClient(server.uri, retry_timeout_s=5.0)
    in_flight = writer.in_flight
    for segment in segments:
        stored = payloads(client, segment)
        acked = writer.acked_events(segment)
        maybe = in_flight.events if in_flight.segment == segment else []
        assert stored in (acked, acked + maybe), f"{segment}: {len(stored)}/{len(acked)} stored"

    # The writer retries its unanswered batch, then (harmlessly) an acknowledged one.
    retried = client.append(in_flight.segment, WRITER, in_flight.first, in_flight.events)
    assert retried.appended + retried.duplicates == BATCH
    assert retried.appended in (0, BATCH)
    old_batch, old_result = writer.acked[-1]
    again = client.append(old_batch.segment, WRITER, old_batch.first, old_batch.events)
    assert (again.appended, again.duplicates, again.ingestion_time) == (0, BATCH, 0)
    for segment in segments:
        retried_here = in_flight.events if in_flight.segment == segment else []
        expected = writer.acked_events(segment) + retried_here
        assert payloads(client, segment) == expected

    # The watermark index and the attributes came back with the data.
    for batch, result in writer.acked:
        size = sum(frame_size(e) for e in batch.events)
        read = client.read(batch.segment, result.write_offset - size, max_bytes=size)
        assert read.next_offset == result.write_offset
        assert read.watermark == result.ingestion_time - 1
        assert {f.ingestion_time for f in iter_frames(read.data)} == {result.ingestion_time}
    for segment in segments:
        info = client.segment_info(segment)
        last = read_frames(client, segment)[-1]
        assert info.creation_time == described.segment(segment).creation_time
        assert info.write_offset == last.offset + frame_size(last.payload)
        assert info.last_write_time == last.ingestion_time
        assert info.watermark == last.ingestion_time - 1
    assert client.segment_info("sc/quiet/0") == quiet_before
    assert payloads(client, "sc/quiet/0") == [b"q0", b"q1", b"q2"]
    client.close()


def _seed(client: StoreClient, clock: ManualClock) -> None:
    client.create_scope("sc")
    client.create_stream("sc", "st", 1)
    clock.advance(10)
    client.append("sc/st/0", "w", 0, [b"one", b"two"])
    clock.advance(10)
    client.append("sc/st/0", "w", 2, [b"three"])


def test_garbage_after_the_last_commit_is_cut_at_restart_and_never_served(
    start_store: Callable[..., StoreServer], data_dir: pathlib.Path, clock: ManualClock
) -> None:
    server = start_store()
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        _seed(client, clock)
        info_before = client.segment_info("sc/st/0")
    server.stop()
    data_file = data_dir / "segments" / "sc" / "st" / "0.events"
    journal = data_dir / "journal.log"
    data_size, journal_size = data_file.stat().st_size, journal.stat().st_size
    with open(data_file, "ab") as file:
        file.write(encode_frames([b"never-acknowledged"], clock.now_ms()))  # whole but uncommitted
        file.write(encode_frames([b"torn" * 20], clock.now_ms())[:30])  # cut mid-frame
        file.write(os.urandom(100))
    with open(journal, "ab") as file:
        file.write(b'\x40\x00\x00\x00\xde\xad\xbe\xef{"op":"commit"')  # a torn record

    server = start_store()
    client = StoreClient(server.uri, retry_timeout_s=2.0)
    assert (data_file.stat().st_size, journal.stat().st_size) == (data_size, journal_size)
    assert payloads(client, "sc/st/0") == [b"one", b"two", b"three"]
    assert client.segment_info("sc/st/0") == info_before
    tail = client.read("sc/st/0", data_size, wait_ms=0)
    assert (tail.data, tail.next_offset) == (b"", data_size)
    inside_garbage = data_size + frame_size(b"never-acknowledged")
    with pytest.raises(InvalidArgumentError, match=f"offset {inside_garbage}"):
        client.read("sc/st/0", inside_garbage)

    clock.advance(10)
    result = client.append("sc/st/0", "w", 3, [b"four"])
    assert (result.appended, result.write_offset) == (1, data_size + frame_size(b"four"))
    server.stop()
    server = start_store()  # the cut files replay cleanly once more
    with StoreClient(server.uri, retry_timeout_s=2.0) as again:
        assert payloads(again, "sc/st/0") == [b"one", b"two", b"three", b"four"]
        assert again.segment_info("sc/st/0").last_write_time == result.ingestion_time
    client.close()


def test_an_append_whose_journal_record_is_torn_is_dropped_whole_and_can_be_retried(
    start_store: Callable[..., StoreServer], data_dir: pathlib.Path, clock: ManualClock
) -> None:
    server = start_store()
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        _seed(client, clock)
        info_before = client.segment_info("sc/st/0")
        clock.advance(10)
        client.append("sc/st/0", "w", 3, [b"torn-away"])
    server.stop()
    journal = data_dir / "journal.log"
    with open(journal, "r+b") as file:  # the crash hit while the last record was being written
        file.truncate(journal.stat().st_size - 3)

    server = start_store()
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        assert payloads(client, "sc/st/0") == [b"one", b"two", b"three"]
        assert client.segment_info("sc/st/0") == info_before
        retried = client.append("sc/st/0", "w", 3, [b"torn-away"])
        assert (retried.appended, retried.duplicates) == (1, 0)
        assert payloads(client, "sc/st/0") == [b"one", b"two", b"three", b"torn-away"]


def _state_of(client: StoreClient, stream: str) -> dict[str, object]:
    """Everything a reader can observe of a stream: lineage, attributes, watermark per event."""
    description = client.describe_stream("sc", stream)
    state: dict[str, object] = {"description": description}
    for segment in description.segments:
        name = segment.segment
        offset, steps = 0, []
        while True:
            read = client.read(name, offset, max_bytes=1)  # one event per read
            steps.append((read.next_offset, read.watermark, read.end_of_segment, read.successors))
            if read.next_offset == offset:
                break
            offset = read.next_offset
        state[name] = (client.segment_info(name), steps)
    return state


def test_lineage_seals_idle_ticks_and_watermarks_survive_a_restart_and_time_goes_on_after_it(
    start_store: Callable[..., StoreServer], clock: ManualClock
) -> None:
    server = start_store(max_watermark_lag_ms=1_000)
    client = StoreClient(server.uri, retry_timeout_s=2.0)
    _seed(client, clock)
    client.scale_stream("sc", "st", [0], 2)
    clock.advance(5)
    client.append("sc/st/1", "w", 0, [b"left"])
    client.append("sc/st/2", "w", 0, [b"right-0", b"right-1"])
    client.append("sc/st/2", "w", 2, [b"right-2"])
    client.scale_stream("sc", "st", [1, 2], 0)
    clock.advance(1_100)
    assert server.store.advance_idle_segments() == 1  # sc/st/3, the only open segment
    client.create_stream("sc", "done", 2)
    client.seal_stream("sc", "done")
    before = {stream: _state_of(client, stream) for stream in ("st", "done")}
    last_time = client.segment_info("sc/st/3").last_write_time
    client.close()
    server.stop()

    clock.advance(-100_000)  # the restarted store's clock is behind the one that wrote
    server = start_store(max_watermark_lag_ms=1_000)
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        assert {stream: _state_of(client, stream) for stream in ("st", "done")} == before
        assert payloads(client, "sc/st/2") == [b"right-0", b"right-1", b"right-2"]
        result = client.append("sc/st/3", "w", 0, [b"after-restart"])
        assert result.ingestion_time == last_time + 1
        assert client.read("sc/st/3", 0).watermark == last_time
