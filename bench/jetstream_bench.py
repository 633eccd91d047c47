"""JetStream benchmark: the JetStream store on 3 nodes beside the file store, and leader kills.

    python -m bench.run jetstream                   # 1,000,000 events, 3 rounds, 10 kills
    python -m bench.run jetstream --events 200000 --rounds 1 --kills 3 --no-write

Part 1, appends and reads, in the same run and alternating (file, JetStream,
file, ...): a ``python -m connector.server`` on the file store (fsync on
every commit) and one with ``--storage jetstream`` on a local 3-node cluster
on loopback (``LocalCluster``: ``sync_interval: always``, replicas 3), each
fed by one :class:`EventWriter` (its own batching: 1 MiB or 20,000 events
per append) with 100-byte events, then read back from offset 0 with reads
of 1 MiB and every event decoded and checked (CRC-32 chained in order).
Append latency is measured apart, as 1,000 ``StoreClient.append`` calls of
100 events each one after the other. CPU seconds are taken from /proc for
the benchmark process (the client), the Tidemark server and the three
nats-server processes: that is where the time goes.

Part 2, the write outage on a leader kill, measured from the client: a
writer appends 10 events every 20 ms through the JetStream server; the node
leading the stream is killed with SIGKILL; the outage is the time from the
kill to the first acknowledgement after it. The node is started again and
the cluster given time to settle between kills.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass

import grpc

from bench._support import (
    BenchFailure,
    StoreServerProcess,
    cpu_seconds,
    package_version,
)
from bench.figures import Percentiles, Target
from connector import BytesSerializer, EventWriter, StoreClient
from connector.devtools.local_cluster import LocalCluster, find_nats_server
from connector.framing import iter_frames

__all__ = ["JetStreamFigures", "Phase", "Round", "measure", "options"]

TARGET_RATIO = 0.5
TARGET_OUTAGE_S = 10.0
CALL_TIMEOUT_S = 120.0
LATENCY_APPENDS = 1_000
LATENCY_BATCH = 100


@dataclass
class Phase:
    """One timed phase: events, wall seconds, and CPU seconds by process."""

    events: int
    seconds: float
    cpu: dict[str, float]

    @property
    def rate(self) -> float:
        """Events per second."""
        return self.events / self.seconds

    @property
    def nats_cpu(self) -> float:
        """CPU seconds of the three nats-server processes together."""
        return sum(v for k, v in self.cpu.items() if k.startswith("nats"))


@dataclass
class Round(Percentiles):
    """One system's figures in one round."""

    system: str
    append: Phase
    read: Phase
    latencies_ms: list[float]

    @property
    def values_ms(self) -> list[float]:
        """The append latencies, ms."""
        return self.latencies_ms


def _payloads(count: int, size: int, seed: int) -> tuple[list[bytes], int]:
    blob = random.Random(seed).randbytes(count * size)
    payloads = [blob[i : i + size] for i in range(0, count * size, size)]
    checksum = 0
    for payload in payloads:
        checksum = zlib.crc32(payload, checksum)
    return payloads, checksum


class _Cpu:
    """CPU seconds of named processes between :meth:`start` and :meth:`stop`."""

    def __init__(self, pids: dict[str, int]):
        self._pids = pids

    def __enter__(self) -> _Cpu:
        self._client = time.process_time()
        self._before = {name: cpu_seconds(pid) or 0.0 for name, pid in self._pids.items()}
        self._wall = time.perf_counter()
        self.cpu: dict[str, float] = {}
        self.seconds = 0.0
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.seconds = time.perf_counter() - self._wall
        self.cpu = {"client": time.process_time() - self._client}
        for name, pid in self._pids.items():
            self.cpu[name] = (cpu_seconds(pid) or 0.0) - self._before[name]


def _run_system(
    system: str,
    uri: str,
    pids: dict[str, int],
    payloads: list[bytes],
    expected: int,
    scope: str,
) -> Round:
    with StoreClient(uri, retry_timeout_s=30, call_timeout_s=CALL_TIMEOUT_S) as client:
        client.create_scope(scope)
        segment = client.create_stream(scope, "events", segment_count=1).segments[0].segment
        writer = EventWriter(client, f"{scope}/events", BytesSerializer(), writer_id="bench")
        write = writer.write_event
        with _Cpu(pids) as appending:
            for payload in payloads:
                write(payload)
            writer.close()
        count, checksum, offset = 0, 0, 0
        with _Cpu(pids) as reading:
            while True:
                result = client.read(segment, offset, max_bytes=1024 * 1024)
                if result.next_offset == offset:
                    break
                for frame in iter_frames(result.data, result.offset):
                    checksum = zlib.crc32(frame.payload, checksum)
                    count += 1
                offset = result.next_offset
        if (count, checksum) != (len(payloads), expected):
            msg = f"{system}: read {count} events, checksum {checksum:#x}; expected {expected:#x}"
            raise BenchFailure(msg)
        batch = payloads[:LATENCY_BATCH]
        latencies = []
        for number in range(LATENCY_APPENDS):
            started = time.perf_counter()
            client.append(segment, "latency", number * LATENCY_BATCH, batch)
            latencies.append((time.perf_counter() - started) * 1000)
    return Round(
        system,
        Phase(len(payloads), appending.seconds, appending.cpu),
        Phase(len(payloads), reading.seconds, reading.cpu),
        latencies,
    )


def _outages(cluster: LocalCluster, uri: str, kills: int, namespace: str) -> list[float]:
    """Seconds from each kill of the stream's leader to the next acknowledged append."""
    acks: list[float] = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def write() -> None:
        try:
            with StoreClient(uri, retry_timeout_s=120, call_timeout_s=60) as client:
                number = 0
                while not stop.is_set():
                    client.append("kills/events/0", "w", number, [b"x" * 100] * 10)
                    number += 10
                    acks.append(time.monotonic())
                    time.sleep(0.02)
        except BaseException as error:  # reported below
            failure.append(error)

    before = set(cluster.stream_names(f"{namespace}_"))
    with StoreClient(uri, retry_timeout_s=30) as client:
        client.create_scope("kills")
        client.create_stream("kills", "events", 1)
    [stream] = set(cluster.stream_names(f"{namespace}_")) - before
    thread = threading.Thread(target=write, name="outage-writer")
    thread.start()
    outages = []
    try:
        for _ in range(kills):
            time.sleep(1.0)  # acknowledgements flow before the kill
            leader = cluster.stream_leader(stream)
            if leader is None:
                msg = f"no leader found for {stream}"
                raise BenchFailure(msg)
            killed = time.monotonic()
            cluster.kill_node(leader)
            deadline = killed + 120
            while not any(t > killed for t in acks[-5:]):
                if failure or time.monotonic() > deadline:
                    msg = f"no acknowledgement within 120 s of a kill: {failure!r}"
                    raise BenchFailure(msg)
                time.sleep(0.005)
            outages.append(next(t for t in acks if t > killed) - killed)
            print(f"  kill {len(outages)}: writes back after {outages[-1]:.2f} s", flush=True)
            cluster.start_node(leader)
            cluster.wait_ready()
    finally:
        stop.set()
        thread.join(timeout=60)
    return outages


def measure(args: argparse.Namespace) -> JetStreamFigures:
    """Both stores, ``--rounds`` times, then ``--kills`` leader kills."""
    payloads, expected = _payloads(args.events, 100, args.seed)
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="jetstream-bench-") as scratch:
        cluster = LocalCluster(os.path.join(scratch, "cluster")).start()
        try:
            nats_pids = {
                f"nats {cluster.node_name(n)}": cluster._processes[n].pid for n in range(3)
            }  # noqa: SLF001
            where = ["--storage", "jetstream", "--nats-url", ",".join(cluster.urls)]
            where += ["--nats-namespace", "bench"]
            with (
                StoreServerProcess() as file_server,
                StoreServerProcess(where=where) as js_server,
            ):
                for n in range(args.rounds):
                    for system, server, pids in (
                        ("file", file_server, {"server": file_server.pid}),
                        ("jetstream", js_server, {"server": js_server.pid, **nats_pids}),
                    ):
                        print(f"round {n + 1}: {system} ...", flush=True)
                        done = _run_system(system, server.uri, pids, payloads, expected, f"r{n}")
                        print(
                            f"  append {done.append.rate:,.0f} events/s, read "
                            f"{done.read.rate:,.0f} events/s, append p99 "
                            f"{done.p99:.2f} ms",
                            flush=True,
                        )
                        rounds.append(done)
                outages = (
                    _outages(cluster, js_server.uri, args.kills, "bench") if args.kills else []
                )
        finally:
            cluster.stop()
    software = (
        f"grpcio {grpc.__version__}",
        f"nats-py {package_version('nats-py')}",
        f"nats-server {_nats_version()}",
    )
    return JetStreamFigures(args.events, args.rounds, rounds, outages, software)


@dataclass(frozen=True)
class JetStreamFigures:
    """Each round's figures of both stores, the outages of the leader kills, and the settings."""

    events: int
    round_count: int
    rounds: list[Round]
    outages: list[float]
    software: tuple[str, ...]
    latency_appends: int = LATENCY_APPENDS
    latency_batch: int = LATENCY_BATCH

    @property
    def numbered(self) -> list[tuple[int, Round]]:
        """(round number from 1, its figures of one store), in the order run."""
        return [(n // 2 + 1, r) for n, r in enumerate(self.rounds)]

    def _median(self, system: str, phase: str) -> float:
        return statistics.median(getattr(r, phase).rate for r in self.rounds if r.system == system)

    @property
    def medians(self) -> dict[str, float]:
        """Median events/s by ``STORE_PHASE``: ``file_append``, ``jetstream_read`` ..."""
        return {
            f"{system}_{phase}": self._median(system, phase)
            for system in ("file", "jetstream")
            for phase in ("append", "read")
        }

    @property
    def append_ratio(self) -> float:
        """JetStream's median append events/s over the file store's."""
        return self._median("jetstream", "append") / self._median("file", "append")

    @property
    def read_ratio(self) -> float:
        """JetStream's median read events/s over the file store's."""
        return self._median("jetstream", "read") / self._median("file", "read")

    @property
    def per_event(self) -> dict[str, float]:
        """Median CPU microseconds per JetStream append event, by process."""
        mine = [r.append for r in self.rounds if r.system == "jetstream"]
        names = mine[0].cpu.keys()
        return {n: statistics.median(p.cpu[n] / p.events * 1e6 for p in mine) for n in names}

    @property
    def total_us(self) -> float:
        """CPU microseconds per JetStream append event, every process together."""
        return sum(self.per_event.values())

    @property
    def busiest(self) -> str:
        """The process with the most CPU per JetStream append event."""
        per_event = self.per_event
        return max(per_event, key=per_event.__getitem__)

    @property
    def busiest_us(self) -> float:
        """The busiest process's CPU microseconds per JetStream append event."""
        return self.per_event[self.busiest]

    @property
    def three_machines(self) -> float:
        """Events/s the busiest process bounds one stream at, each process with cores of its own."""
        return 1e6 / self.busiest_us

    @property
    def network_bound(self) -> float:
        """Events/s a 1 Gb/s network carries: the leader sends each 118-byte frame to two nodes."""
        return 125e6 / (2 * 118)

    @property
    def kills(self) -> int:
        """Leader kills measured."""
        return len(self.outages)

    @property
    def outage_p50(self) -> float:
        """The median outage, seconds."""
        return statistics.median(self.outages)

    @property
    def targets(self) -> dict[str, Target]:
        """JetStream's rates beside the file store's, and the longest outage (when killed)."""
        return {
            "append_ratio": Target(self.append_ratio, ">=", TARGET_RATIO),
            "read_ratio": Target(self.read_ratio, ">=", TARGET_RATIO),
            "outage": Target(max(self.outages, default=None), "<=", TARGET_OUTAGE_S, "s"),
        }


def _nats_version() -> str:
    try:
        done = subprocess.run([find_nats_server(), "--version"], capture_output=True, text=True)
    except OSError:
        return "unknown"
    return done.stdout.strip().removeprefix("nats-server: ")


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20261125)
    return parser
