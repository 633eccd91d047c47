"""Kill -9 the stream leader and a Tidemark server, ten times, while writing and reading.

A 3-node cluster of real nats-server processes, two ``python -m
connector.server --storage jetstream`` processes behind one address (a TCP
load balancer, :class:`FailoverProxy`), two :class:`EventWriter` threads
writing numbered events of six routing keys, and a reader group of two
readers in the ingestion-time domain. Ten times: once the writers have had
more batches acknowledged and the readers read more, the node leading the
stream's JetStream stream and one of the Tidemark servers are killed with
SIGKILL; writers and readers carry on through the other server once the
cluster has elected a new leader (the clients retry; the store retries
across the election). Afterwards: every acknowledged event was read exactly
once, each key's events in the order written, each reader's watermarks
strictly ascending. Each cycle's time to the first write and the first read
after the kill is checked against a liveness bound here; the 10 s target is
measured by ``bench/jetstream_bench.py``.
"""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from connector import EventWriter, StoreClient, StreamManager
from connector.client import StringSerializer, WriterConfig
from connector.devtools.local_cluster import LocalCluster
from connector.reader import ReaderConfig, ReaderGroupManager, TimeDomain
from connector.reader.group import ReaderGroup
from tests.conftest import ServerProcess, wait_until
from tests.store.jetstream.failover_proxy import FailoverProxy

pytestmark = [pytest.mark.slow, pytest.mark.long]

CYCLES = 10
KEYS = [f"key-{n}" for n in range(6)]
#: Liveness, not performance: reads and writes must come back (the election takes 4.5-7.8 s).
RESUME_BOUND_S = 60.0


@dataclass
class _Writer:
    name: str
    acked: list[str] = field(default_factory=list)
    acked_at: list[float] = field(default_factory=list)
    error: BaseException | None = None
    trace: str = ""


@dataclass
class _Reader:
    name: str
    events: list[str] = field(default_factory=list)
    read_at: list[float] = field(default_factory=list)
    watermarks: list[int] = field(default_factory=list)
    error: BaseException | None = None


def _write(uri: str, writer: _Writer, stop: threading.Event) -> None:
    numbers = dict.fromkeys(KEYS, 0)
    try:
        with StoreClient(uri, retry_timeout_s=120.0) as client:
            out = EventWriter(
                client,
                "lk/events",
                StringSerializer(),
                writer_id=writer.name,
                config=WriterConfig(max_batch_events=1_000),
            )
            while not stop.is_set():
                batch = []
                for key in KEYS:
                    event = f"{writer.name}|{key}|{numbers[key]}"
                    numbers[key] += 1
                    out.write_event(event, routing_key=key)
                    batch.append(event)
                out.flush()  # retried by the client across the outage; raises if it gives up
                writer.acked += batch
                writer.acked_at += [time.monotonic()] * len(batch)
                time.sleep(0.02)
            out.close()
    except BaseException as error:  # the test reports it
        writer.error = error
        writer.trace = traceback.format_exc()


def _read(uri: str, reader: _Reader, stop: threading.Event) -> None:
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)
    try:
        with StoreClient(uri, retry_timeout_s=120.0) as client:
            group = ReaderGroup(client, "lk", "g")
            with group.create_reader(reader.name, StringSerializer(), config) as source:
                while not stop.is_set():
                    read = source.read_next_event(timeout_ms=200)
                    if read is None:
                        continue
                    if read.is_watermark:
                        reader.watermarks.append(read.watermark)
                    else:
                        reader.events.append(read.event)
                        reader.read_at.append(time.monotonic())
    except BaseException as error:
        reader.error = error


def _leader(cluster: LocalCluster, stream: str) -> tuple[int] | None:
    """The node leading ``stream``, in a tuple (node 0 is no falsy answer to wait for)."""
    leader = cluster.stream_leader(stream)
    return None if leader is None else (leader,)


def _first_after(times: list[float], moment: float) -> float | None:
    return next((t for t in times if t > moment), None)


def test_ten_leader_and_server_kills_lose_nothing_acknowledged_and_read_it_all_once(
    start_nats_cluster: Callable[..., LocalCluster],
    spawn_server: Callable[..., ServerProcess],
) -> None:
    cluster = start_nats_cluster()
    namespace = f"lk{uuid.uuid4().hex[:8]}"
    args = ["--storage", "jetstream", "--nats-url", ",".join(cluster.urls)]
    args += ["--nats-namespace", namespace, "--max-watermark-lag-ms", "500"]
    args += ["--polling-period-ms", "100"]
    servers = [spawn_server(None, *args) for _ in range(2)]
    proxy = FailoverProxy([s.address for s in servers])
    with StoreClient(proxy.uri) as client:
        StreamManager(client).create_scope("lk")
        client.create_stream("lk", "events", 2)
        ReaderGroupManager(client).create_reader_group("lk", "g", ["lk/events"])
    [stream] = cluster.stream_names(f"{namespace}_")
    stop_writing, stop_reading = threading.Event(), threading.Event()
    writers = [_Writer(f"writer-{n}") for n in range(2)]
    readers = [_Reader(f"reader-{n}") for n in range(2)]
    threads = [threading.Thread(target=_write, args=(proxy.uri, w, stop_writing)) for w in writers]
    threads += [threading.Thread(target=_read, args=(proxy.uri, r, stop_reading)) for r in readers]
    for thread in threads:
        thread.start()
    outages: list[tuple[float, float]] = []
    try:
        for cycle in range(CYCLES):
            acked = sum(len(w.acked) for w in writers)
            read = sum(len(r.events) for r in readers)
            wait_until(
                lambda a=acked, r=read: (
                    sum(len(w.acked) for w in writers) >= a + 60
                    and sum(len(x.events) for x in readers) >= r + 60
                ),
                timeout=RESUME_BOUND_S,
                what=f"writes and reads before kill {cycle}",
            )
            (leader,) = wait_until(lambda: _leader(cluster, stream), what="the stream's leader")
            victim = cycle % 2
            killed_at = time.monotonic()
            cluster.kill_node(leader)
            servers[victim].process.kill()
            servers[victim].process.wait(timeout=10)
            written = wait_until(
                lambda t=killed_at: min(
                    (x for x in (_first_after(w.acked_at, t) for w in writers) if x), default=None
                ),
                timeout=RESUME_BOUND_S,
                what=f"a write acknowledged after kill {cycle}",
            )
            read_again = wait_until(
                lambda t=written: min(
                    (x for x in (_first_after(r.read_at, t) for r in readers) if x), default=None
                ),
                timeout=RESUME_BOUND_S,
                what=f"a read after kill {cycle}",
            )
            outages.append((written - killed_at, read_again - killed_at))
            cluster.start_node(leader)
            cluster.wait_ready()
            servers[victim] = spawn_server(None, *args)
            proxy.backends[victim] = servers[victim].address
        stop_writing.set()
        for thread in threads[:2]:
            thread.join(timeout=RESUME_BOUND_S)
        for writer in writers:
            assert writer.error is None, f"{writer.name}: {writer.trace}"
        acked = {event for w in writers for event in w.acked}
        wait_until(
            lambda: acked <= {e for r in readers for e in r.events},
            timeout=RESUME_BOUND_S,
            what="every acknowledged event read",
        )
    finally:
        stop_writing.set()
        stop_reading.set()
        for thread in threads:
            thread.join(timeout=RESUME_BOUND_S)
        proxy.close()
    for reader in readers:
        assert reader.error is None, f"{reader.name}: {reader.error!r}"
        marks = reader.watermarks
        assert all(a < b for a, b in zip(marks, marks[1:], strict=False)), reader.name
    everything = [event for r in readers for event in r.events]
    assert len(everything) == len(set(everything)), "an event was read twice"
    by_key: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for reader in readers:
        for event, at in zip(reader.events, reader.read_at, strict=True):
            writer, key, number = event.split("|")
            by_key[(writer, key)].append((at, int(number)))
    for (writer, key), reads in by_key.items():
        numbers = [number for _, number in sorted(reads)]
        assert numbers == sorted(numbers), f"{writer}'s {key} read out of order"
    assert len(outages) == CYCLES
    print(f"write and read outages after each kill (s): {outages}")
