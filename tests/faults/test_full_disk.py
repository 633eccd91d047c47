"""A full disk with every kind of change in flight, then space returns.

One server process on a 4 MiB tmpfs (tests run as root), idle ticks every
50 ms for segments idle 200 ms. Two event writers, a raw appender, a reader
of a group and a compare-and-set loop run while the disk fills; once every
one of them is refused, a new scope, a new stream, a scale, a seal and a
truncation are asked for at once. Then space returns, and:

- every acknowledged change is there, also after a kill -9 and a restart;
- nothing refused was applied in part: a refused append sent again is
  stored whole (never found half stored), and each refused change succeeds
  when asked again (no "already exists", no "sealed already");
- the writers resume, and the reader has read every event once;
- idle ticks move the watermarks again, with no append and no restart;
- health went NOT_SERVING and came back to SERVING.

Bounded: each loop runs at most ``MAX_STEPS`` steps, each wait has a timeout.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import grpc
import pytest

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.errors import ResourceExhaustedError
from connector.reader import EventReader, ReaderConfig, ReaderGroupManager
from tests.conftest import wait_until
from tests.probes import (
    NOT_SERVING,
    SERVING,
    fill_disk,
    fill_journal,
    health_of,
    metrics_address,
    read_all,
    scrape,
)

pytestmark = pytest.mark.slow

SCOPE = "f"
WRITTEN = "f/w"  # two event writers, read by the group
RAW = "f/raw/0"  # the raw appender's segment
COUNTER = "f-counter"  # the compare-and-set loop's key
IDLE_SEGMENTS = 4
LAG_MS = 200
POLLING_MS = 50
KEYS = 5
PAD = "x" * 512
MAX_STEPS = 20_000
PACE_S = 0.01  # between retries of a refused step, while the disk is full


class _Loop(threading.Thread):
    """Runs ``step`` until ``stop``, at most MAX_STEPS times; counts acknowledgements and refusals.

    A step ``refusable`` for want of space is paced and tried again when so
    refused; any other error ends the loop and is kept for the test to report.
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], object],
        stop: threading.Event,
        refusable: bool = True,
    ):
        super().__init__(name=name, daemon=True)
        self.step = step
        self.stop = stop
        self.refusable = refusable
        self.acks = 0
        self.refusals = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for _ in range(MAX_STEPS):
                if self.stop.is_set():
                    return
                try:
                    self.step()
                except ResourceExhaustedError:
                    if not self.refusable:
                        raise
                    self.refusals += 1
                    self.stop.wait(PACE_S)
                else:
                    self.acks += 1
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error


class _Writer:
    """An event writer that flushes each event; a refused flush is flushed again."""

    def __init__(self, client: StoreClient, name: str):
        self.name = name
        self.writer: EventWriter[Any] = EventWriter(
            client, WRITTEN, JsonSerializer(), writer_id=name
        )
        self.acknowledged: list[int] = []
        self._next = 0
        self._queued = False

    def __call__(self) -> None:
        if not self._queued:
            event = {"writer": self.name, "n": self._next, "pad": PAD}
            self.writer.write_event(event, routing_key=f"{self.name}-{self._next % KEYS}")
            self._queued = True
        self.writer.flush()
        self._queued = False
        self.acknowledged.append(self._next)
        self._next += 1


class _RawAppender:
    """Appends batches of three events; a refused batch is sent again as it was.

    Sent again, it must be stored whole: a duplicate in the answer would mean
    the refused append had been stored in part.
    """

    def __init__(self, client: StoreClient):
        self.client = client
        self.stored: list[bytes] = []

    def __call__(self) -> None:
        first = len(self.stored)
        batch = [f"raw-{first + i}".encode() for i in range(3)]
        result = self.client.append(RAW, "raw", first, batch)
        assert (result.appended, result.duplicates) == (3, 0), f"batch at {first}: {result}"
        self.stored += batch


def _count_up(client: StoreClient) -> None:
    current = client.get_state(COUNTER)
    value = str(current.revision + 1).encode()
    written, _ = client.compare_and_set_state(COUNTER, current.revision, value)
    assert written, "the loop is the key's only writer"


# --- the metadata changes asked for on the full disk -------------------------------------


def _changes(cut: int) -> dict[str, Callable[[StoreClient], object]]:
    return {
        "create scope": lambda c: c.create_scope("f2"),
        "create stream": lambda c: c.create_stream(SCOPE, "new", 2),
        "scale": lambda c: c.scale_stream(SCOPE, "scale", [0], 2),
        "seal": lambda c: c.seal_stream(SCOPE, "seal"),
        "truncate": lambda c: c.truncate_stream(SCOPE, "trunc", {0: cut}),
    }


def _made(client: StoreClient, cut: int) -> dict[str, bool]:
    """Which of the changes the store holds now."""
    scaled = client.describe_stream(SCOPE, "scale")
    return {
        "create scope": "f2" in client.list_scopes(),
        "create stream": "new" in client.list_streams(SCOPE),
        "scale": len(scaled.segments) == 3 and scaled.segments[0].sealed,
        "seal": client.describe_stream(SCOPE, "seal").sealed,
        "truncate": client.segment_info(f"{SCOPE}/trunc/0").first_offset == cut,
    }


def _ask(uri: str, change: Callable[[StoreClient], object]) -> bool:
    """Asks for ``change`` on a client of its own; returns whether it was acknowledged."""
    with StoreClient(uri, retry_timeout_s=2.0) as client:
        try:
            change(client)
        except ResourceExhaustedError:
            return False
    return True


# --- what the store holds -------------------------------------------------------------------


def _everything(client: StoreClient) -> dict[str, object]:
    """Every stream's description, every segment's data and extent, and the state values."""
    held: dict[str, object] = {}
    for scope in client.list_scopes():
        for stream in client.list_streams(scope):
            description = client.describe_stream(scope, stream)
            held[f"{scope}/{stream}"] = description
            for segment in description.segments:
                info = client.segment_info(segment.segment)
                held[segment.segment] = (info.first_offset, info.write_offset, info.sealed)
                if info.first_offset == 0:
                    held[segment.segment + " data"] = read_all(client, segment.segment)
    for key in client.list_state_keys(""):
        held[key] = client.get_state(key).value
    return held


def _written_events(client: StoreClient) -> list[dict[str, Any]]:
    segments = client.describe_stream(SCOPE, "w").segments
    return [json.loads(event) for s in segments for event in read_all(client, s.segment)]


def _failed_idle_rounds(metrics: str) -> float:
    return scrape(metrics)[
        ("tidemark_background_task_failed_rounds_total", (("task", "idle_ticks"),))
    ]


def _setup(client: StoreClient) -> int:
    """Creates the streams and the group; returns the truncation cut (after 5 events)."""
    manager = StreamManager(client)
    manager.create_scope(SCOPE)
    manager.create_stream(SCOPE, "w", 2)
    for stream, segments in (("raw", 1), ("idle", IDLE_SEGMENTS), ("scale", 1), ("seal", 1)):
        manager.create_stream(SCOPE, stream, segments)
    manager.create_stream(SCOPE, "trunc", 1)
    ends = [client.append(f"{SCOPE}/trunc/0", "t", n, [b"t" * 100]).write_offset for n in range(10)]
    ReaderGroupManager(client).create_reader_group(SCOPE, "g", [WRITTEN])
    return ends[4]


def test_a_full_disk_with_every_kind_of_change_in_flight_keeps_what_was_acknowledged(
    small_disk: pathlib.Path, spawn_server
) -> None:
    data_dir = small_disk / "data"
    server = spawn_server(
        data_dir,
        "--max-watermark-lag-ms",
        str(LAG_MS),
        "--polling-period-ms",
        str(POLLING_MS),
        "--metrics-listen",
        "127.0.0.1:0",
    )
    metrics = metrics_address(server)
    stop = threading.Event()
    with ExitStack() as stack:
        client = stack.enter_context(StoreClient(server.uri, retry_timeout_s=2.0))
        channel = stack.enter_context(grpc.insecure_channel(server.address))

        def own_client() -> StoreClient:
            return stack.enter_context(StoreClient(server.uri, retry_timeout_s=2.0))

        cut = _setup(client)
        idle = [s.segment for s in client.describe_stream(SCOPE, "idle").segments]
        writers = [_Writer(own_client(), name) for name in ("w1", "w2")]
        raw = _RawAppender(own_client())
        counter_client = own_client()
        group = ReaderGroupManager(own_client()).get_reader_group(SCOPE, "g")
        reader: EventReader[Any] = group.create_reader(
            "r1", JsonSerializer(), ReaderConfig(), sync_interval_ms=20
        )
        read: list[dict[str, Any]] = []

        def read_one() -> None:
            event = reader.read_next_event(50)
            if event is not None and event.is_event:
                read.append(event.event)

        changing = [
            *(_Loop(w.name, w, stop) for w in writers),
            _Loop("raw", raw, stop),
            _Loop("counter", lambda: _count_up(counter_client), stop),
        ]
        # A reader reads on while its group's state cannot be written: it is never refused.
        loops = [*changing, _Loop("reader", read_one, stop, refusable=False)]
        for loop in loops:
            loop.start()
        try:
            wait_until(lambda: all(loop.acks >= 5 for loop in loops), 20, what="work in flight")

            filler = fill_disk(small_disk)
            fill_journal(client)
            wait_until(
                lambda: all(loop.refusals for loop in changing),
                20,
                what=f"every change refused: {[(x.name, x.refusals, x.error) for x in loops]}",
            )
            wait_until(lambda: health_of(channel) == NOT_SERVING, what="NOT_SERVING")
            failed_ticks = _failed_idle_rounds(metrics)
            changes = _changes(cut)
            with ThreadPoolExecutor(len(changes)) as pool:
                asked = {name: pool.submit(_ask, server.uri, c) for name, c in changes.items()}
                acknowledged = {name: future.result() for name, future in asked.items()}
            assert _made(client, cut) == acknowledged, "what was refused is not there"
            wait_until(
                lambda: _failed_idle_rounds(metrics) >= failed_ticks + 3,
                what="idle rounds failing",
            )
            stalled_watermarks = {s: client.segment_info(s).watermark for s in idle}
            acks_when_full = {loop.name: loop.acks for loop in loops}

            filler.unlink()
            wait_until(
                lambda: all(loop.acks >= acks_when_full[loop.name] + 5 for loop in changing),
                20,
                what="the writers, the appender and the counter resume",
            )
            wait_until(
                lambda: all(
                    client.segment_info(s).watermark > w for s, w in stalled_watermarks.items()
                ),
                10,
                what="idle ticks after the disk came back",
            )
            wait_until(lambda: health_of(channel) == SERVING, what="SERVING again")
        finally:
            stop.set()
            for loop in loops:
                loop.join(timeout=30)
        assert [(loop.name, loop.error) for loop in loops if loop.error] == []

        for name, change in changes.items():  # a refused change left nothing in its way
            if not acknowledged[name]:
                change(client)
        assert all(_made(client, cut).values())
        for writer in writers:
            if writer.writer.pending_events:  # stopped after a refused flush
                writer()
            writer.writer.close()
        stored = _written_events(client)
        for writer in writers:
            mine = [e["n"] for e in stored if e["writer"] == writer.name]
            assert sorted(mine) == writer.acknowledged, f"{writer.name}: each event once"
        assert read_all(client, RAW) == raw.stored
        assert client.get_state(COUNTER).revision == changing[-1].acks

        def read_everything() -> bool:
            read_one()
            return len(read) >= len(stored)

        wait_until(read_everything, 20, what="the reader to read every event")
        reader.close()
        key = [(e["writer"], e["n"]) for e in read]
        assert sorted(key) == sorted((e["writer"], e["n"]) for e in stored), "read once each"
        held = _everything(client)

    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    restarted = spawn_server(data_dir)
    with StoreClient(restarted.uri, retry_timeout_s=2.0) as client:
        assert _everything(client) == held, "every acknowledged change survives a kill -9"
