"""JetStream benchmark: the JetStream store on 3 nodes beside the file store, and leader kills.

    python bench/run.py jetstream                   # 1,000,000 events, 3 rounds, 10 kills
    python bench/jetstream_bench.py --events 200000 --rounds 1 --kills 3

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
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
from _support import (  # noqa: E402
    BenchFailure,
    StoreServerProcess,
    command_block,
    cpu_seconds,
    load_average,
    machine_facts,
    markdown_table,
    package_version,
    percentile,
    print_table,
    run_and_record,
)

from connector import BytesSerializer, EventWriter, StoreClient  # noqa: E402
from connector.devtools.local_cluster import LocalCluster, find_nats_server  # noqa: E402
from connector.framing import iter_frames  # noqa: E402

__all__ = ["main"]

SECTION = "jetstream"
HEADING = (
    "JetStream store: appends, reads and leader kills on a 3-node cluster, beside the file store"
)
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
        return self.events / self.seconds


@dataclass
class Round:
    """One system's figures in one round."""

    system: str
    append: Phase
    read: Phase
    latencies_ms: list[float]


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


def _run(args: argparse.Namespace) -> str:
    args.load_before = load_average()
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
                            f"{percentile(done.latencies_ms, 99):.2f} ms",
                            flush=True,
                        )
                        rounds.append(done)
                outages = (
                    _outages(cluster, js_server.uri, args.kills, "bench") if args.kills else []
                )
        finally:
            cluster.stop()
    args.load_after = load_average()
    return _report(args, rounds, outages)


def _median(rounds: Sequence[Round], system: str, phase: str) -> float:
    return statistics.median(getattr(r, phase).rate for r in rounds if r.system == system)


def _cpu_per_event(rounds: Sequence[Round], system: str, phase: str) -> dict[str, float]:
    """Median CPU microseconds per event, by process."""
    mine = [getattr(r, phase) for r in rounds if r.system == system]
    names = mine[0].cpu.keys()
    return {n: statistics.median(p.cpu[n] / p.events * 1e6 for p in mine) for n in names}


def _report(args: argparse.Namespace, rounds: list[Round], outages: list[float]) -> str:
    rows = [
        [
            "round",
            "store",
            "append events/s",
            "read events/s",
            "append p50 ms",
            "append p99 ms",
            "append CPU s: client / server / nats (3 nodes)",
            "read CPU s: client / server / nats",
        ]
    ]
    for n, r in enumerate(rounds):
        nats = lambda p: sum(v for k, v in p.cpu.items() if k.startswith("nats"))  # noqa: E731
        rows.append(
            [
                str(n // 2 + 1),
                r.system,
                f"{r.append.rate:,.0f}",
                f"{r.read.rate:,.0f}",
                f"{percentile(r.latencies_ms, 50):.2f}",
                f"{percentile(r.latencies_ms, 99):.2f}",
                f"{r.append.cpu['client']:.2f} / {r.append.cpu['server']:.2f} / "
                f"{nats(r.append):.2f}",
                f"{r.read.cpu['client']:.2f} / {r.read.cpu['server']:.2f} / {nats(r.read):.2f}",
            ]
        )
    print_table(rows)
    file_append, js_append = (
        _median(rounds, "file", "append"),
        _median(rounds, "jetstream", "append"),
    )
    file_read, js_read = _median(rounds, "file", "read"), _median(rounds, "jetstream", "read")
    append_ratio, read_ratio = js_append / file_append, js_read / file_read
    per_event = _cpu_per_event(rounds, "jetstream", "append")
    busiest = max(per_event, key=per_event.__getitem__)
    total_us = sum(per_event.values())
    cores = os.cpu_count() or 1
    # Three machines: each process has cores of its own; the busiest one bounds the rate.
    three_machines = 1e6 / per_event[busiest]
    # A 1 Gb/s network: the leader sends each frame (118 bytes) to two followers.
    network_bound = 125e6 / (2 * 118)
    lines = [
        f"## {HEADING}",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {_machine()}.",
        "",
        *command_block(),
        "",
        f"Workload: {args.events:,} events of 100 bytes per store and round, {args.rounds} "
        "rounds alternating file and JetStream, in one run. One EventWriter (1 MiB or 20,000 "
        "events per append), then reads of 1 MiB from offset 0, every event decoded and "
        f"checked; append latency from {LATENCY_APPENDS:,} appends of {LATENCY_BATCH} events "
        "one after the other. The file store: a server process, fsync on every commit. "
        "JetStream: a server process with --storage jetstream on a 3-node cluster of "
        "nats-server processes on loopback (replicas 3, sync_interval always: a node fsyncs "
        "before it acknowledges). Everything runs on this machine's "
        f"{cores} cores: the benchmark, the Tidemark server and, for JetStream, three "
        f"nats-server processes. Load average (1 min) {args.load_before:.2f} before the run, "
        f"{args.load_after:.2f} after: other developers' test runs shared the machine.",
        "",
        markdown_table(rows),
        "",
        f"Medians: append file {file_append:,.0f}, JetStream {js_append:,.0f} events/s "
        f"(ratio **{append_ratio:.2f}**); read file {file_read:,.0f}, JetStream "
        f"{js_read:,.0f} events/s (ratio **{read_ratio:.2f}**).",
        "",
        "Where the time goes (JetStream appends, median CPU per event): "
        + ", ".join(f"{name} {us:.2f} µs" for name, us in per_event.items())
        + f"; {total_us:.2f} µs in all, on {cores} cores shared by every process.",
        "",
        "On paper, three machines (one nats-server and one Tidemark server each, the client "
        f"apart): each process gets cores of its own, so the busiest one ({busiest}, "
        f"{per_event[busiest]:.2f} µs per event) bounds one stream's appends at about "
        f"{three_machines:,.0f} events/s; a 1 Gb/s network carries the leader's two copies "
        f"of every 118-byte frame up to about {network_bound:,.0f} events/s. Streams lead "
        "on different nodes and several Tidemark servers share the clients, so more streams "
        "add to that rather than share it.",
    ]
    if outages:
        lines += [
            "",
            f"Write outage on a kill -9 of the stream's leader, from the client ({len(outages)} "
            f"kills): p50 **{statistics.median(outages):.2f} s**, max **{max(outages):.2f} s** "
            f"(each: {', '.join(f'{o:.2f}' for o in outages)} s). JetStream's election takes "
            "4.5 to 7.8 s; a publish to the dead leader times out after 2 s and is sent again "
            "under the same compare-and-set.",
        ]
    verdicts = [
        (f"appends >= {TARGET_RATIO} of the file store's", append_ratio >= TARGET_RATIO),
        (f"reads >= {TARGET_RATIO} of the file store's", read_ratio >= TARGET_RATIO),
    ]
    if outages:
        verdicts.append(
            (f"write outage within {TARGET_OUTAGE_S:.0f} s (max)", max(outages) <= TARGET_OUTAGE_S)
        )
    lines += ["", "Targets:", ""]
    lines += [f"- {what}: **{'met' if ok else 'missed'}**" for what, ok in verdicts]
    return "\n".join(lines)


def _machine() -> str:
    return machine_facts(
        f"grpcio {grpc.__version__}",
        f"nats-py {package_version('nats-py')}",
        f"nats-server {_nats_version()}",
    )


def _nats_version() -> str:
    import subprocess

    try:
        done = subprocess.run([find_nats_server(), "--version"], capture_output=True, text=True)
    except OSError:
        return "unknown"
    return done.stdout.strip().removeprefix("nats-server: ")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; 0 when it ran (the targets are reported, not enforced)."""
    args = _parser().parse_args(argv)
    return run_and_record(SECTION, lambda: _run(args), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
