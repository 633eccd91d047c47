"""Kill -9 in a loop: two writers and a reader group against a real server process.

On both storages: the file store's server holds the data; a JetStream
store's server holds nothing the cluster lacks, so there a kill tests that a
server started again rebuilds every stream and answers retries right.

A ``python -m connector.server`` is killed with SIGKILL 20 times while two
:class:`EventWriter` threads write numbered events of six routing keys and a
reader of a reader group reads; each time it is started again on the same
data dir and port, and the writers' and the reader's clients carry on by
retrying (a batch in flight at a kill is resent with the same numbers).
Each cycle waits until both writers have had a batch acknowledged by the new
server and a seeded number of events more, then kills the server the moment
its data files hold more than the writers have had acknowledged: a batch on
its way, torn (the restart cuts it off), committed or answered. A kill
between a batch's commit and its answer, after which the resend is a
duplicate the store must skip, is rare here (the window is the sending of
one answer): tests/faults/test_lost_answers.py makes that case on purpose.
Afterwards, per routing key: every acknowledged event is
stored, once, in the order written; nothing is stored that was not written;
and the reader read every one of them, once, in order. The long version,
with raw appends and a kill at any moment, is ``bench/store_faults.py``.
"""

from __future__ import annotations

import os
import pathlib
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from connector import EventWriter, StoreClient, StreamManager
from connector.client import StringSerializer, WriterConfig
from connector.framing import encode_frames
from connector.reader import ReaderGroupManager
from tests.store import payloads

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.storages("file", "jetstream")]

SEED = 20261125
CYCLES = 20
KEYS = [f"key-{n}" for n in range(6)]
#: Generous: a client is back within about a second of its server.
RETRY_S = 30.0


@dataclass
class _Writer:
    """One writer thread's record: what it wrote, what was acknowledged."""

    name: str
    acked: list[str] = field(default_factory=list)
    acked_bytes: int = 0
    flushes: int = 0
    error: BaseException | None = None


def _write(uri: str, writer: _Writer, stop: threading.Event, rng: random.Random) -> None:
    """Writes batches of 1 to 20 events of random keys, each flushed, until ``stop``."""
    numbers: dict[str, int] = defaultdict(int)
    try:
        with StoreClient(uri, retry_timeout_s=RETRY_S, call_timeout_s=10.0) as client:
            config = WriterConfig(max_batch_events=1_000)
            events = EventWriter(client, "k9/s", StringSerializer(), writer.name, config)
            while not stop.is_set():
                batch, size = [], 0
                for _ in range(rng.randint(1, 20)):
                    key = rng.choice(KEYS)
                    batch.append(f"{writer.name}|{key}|{numbers[key]}")
                    numbers[key] += 1
                    size += len(encode_frames([batch[-1].encode()], 0, [key]))
                    events.write_event(batch[-1], routing_key=key)
                events.flush()  # across a kill: retried until the server is back
                writer.acked += batch
                writer.acked_bytes += size
                writer.flushes += 1
            events.close()
    except BaseException as error:  # noqa: BLE001 - reported by the test
        writer.error = error


def _read(uri: str, seen: list[str], stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        with StoreClient(uri, retry_timeout_s=RETRY_S, call_timeout_s=10.0) as client:
            group = ReaderGroupManager(client).create_reader_group("k9", "g", ["k9/s"])
            with group.create_reader("reader", StringSerializer()) as reader:
                while not stop.is_set():
                    read = reader.read_next_event(timeout_ms=200)
                    if read is not None and read.is_event:
                        seen.append(read.event)
    except BaseException as error:  # noqa: BLE001 - reported by the test
        errors.append(error)


def _moved_on(writers: list[_Writer], flushes: list[int], goal: int) -> bool:
    """Whether each writer flushed since ``flushes`` and ``goal`` events are acknowledged in all.

    True as well once a writer failed, so the test reports that at once.
    """
    if any(w.error for w in writers):
        return True
    flushed = all(w.flushes > before for w, before in zip(writers, flushes, strict=True))
    return flushed and sum(len(w.acked) for w in writers) >= goal


def _wait_for_a_batch_in_flight(stored: Callable[[], int], writers: list[_Writer]) -> bool:
    """Polls (up to 2 s) until the store holds more than was acknowledged; whether it did."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        if stored() > sum(w.acked_bytes for w in writers):
            return True
        time.sleep(0.0005)  # a poll interval, not a wait for the condition
    return False


def _on_disk(data_dir: pathlib.Path) -> Callable[[], int]:
    """The bytes of the file store's data files."""
    return lambda: sum(f.stat().st_size for f in (data_dir / "segments").rglob("*.events"))


def _in_cluster(client: StoreClient) -> Callable[[], int]:
    """The bytes the JetStream cluster holds of the stream (the segments' ends, as stored)."""
    return lambda: sum(client.segment_info(f"k9/s/{n}").write_offset for n in range(2))


def _by_key(events: list[str]) -> dict[tuple[str, str], list[int]]:
    """(writer, key) -> the numbers of its events, in the order given."""
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    for event in events:
        writer, key, number = event.split("|")
        found[writer, key].append(int(number))
    return found


def test_twenty_kills_lose_nothing_acknowledged_and_duplicate_nothing(
    tmp_path, spawn_server, wait_until, storage
):
    rng = random.Random(SEED)
    data_dir = tmp_path / "data"
    server = spawn_server(data_dir)
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("k9")
        StreamManager(client).create_stream("k9", "s", segment_count=2)
    stop_writing, stop_reading = threading.Event(), threading.Event()
    writers = [_Writer("w0"), _Writer("w1")]
    seen: list[str] = []
    reader_errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_write, args=(server.uri, w, stop_writing, random.Random(n)))
        for n, w in enumerate(writers)
    ]
    threads.append(
        threading.Thread(target=_read, args=(server.uri, seen, stop_reading, reader_errors))
    )
    for thread in threads:
        thread.start()
    started = time.monotonic()
    in_flight = 0  # kills that found a batch on disk and not yet acknowledged
    try:
        for cycle in range(CYCLES):
            flushes = [w.flushes for w in writers]
            more = rng.randint(0, 30)
            goal = sum(len(w.acked) for w in writers) + more
            wait_until(
                lambda flushes=flushes, goal=goal: _moved_on(writers, flushes, goal),
                timeout=60,
                what=f"both writers acknowledged by the server of cycle {cycle}",
            )
            assert not any(w.error for w in writers), [w.error for w in writers]
            if storage == "file":
                in_flight += _wait_for_a_batch_in_flight(_on_disk(data_dir), writers)
            else:  # the server holds nothing: what the cluster holds is what counts
                with StoreClient(server.uri, retry_timeout_s=5.0) as looking:
                    in_flight += _wait_for_a_batch_in_flight(_in_cluster(looking), writers)
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=10)
            server = spawn_server(data_dir, "--listen", server.address)
        stop_writing.set()
        for thread in threads[:2]:
            thread.join(timeout=60)
        acked = [event for w in writers for event in w.acked]
        wait_until(
            lambda: len(seen) >= len(acked) or reader_errors,
            timeout=60,
            what="the reader to catch up",
        )
    finally:
        stop_writing.set()
        stop_reading.set()
        for thread in threads:
            thread.join(timeout=30)
    with StoreClient(server.uri) as client:
        stored = [
            event.decode()
            for segment in client.describe_stream("k9", "s").segments
            for event in payloads(client, segment.segment)
        ]
    elapsed = time.monotonic() - started

    print(
        f"{CYCLES} kills ({in_flight} with a batch on disk, not yet acknowledged), "
        f"{len(acked)} events acknowledged and read in {elapsed:.1f} s"
    )
    assert [w.error for w in writers] == [None, None]
    assert reader_errors == []
    assert in_flight >= CYCLES // 2, "too few kills landed while a batch was on its way"
    assert len(acked) > CYCLES * 10, f"only {len(acked)} events acknowledged in {elapsed:.0f} s"
    written = _by_key(acked)  # everything written was acknowledged: the writers ended flushed
    assert _by_key(stored) == written, "lost, duplicated or reordered in the store"
    assert _by_key(seen) == written, "lost, duplicated or reordered by the reader"
    for numbers in written.values():
        assert numbers == list(range(len(numbers)))
