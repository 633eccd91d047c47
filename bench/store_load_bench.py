"""Store under load: appends beside 1,000 reads parked at tails, and 16 writers with 8 readers.

    python -m bench.run store_load                        # full length
    python -m bench.run store_load --parked 200 --seconds 10 --no-write   # shorter

Both parts run against a real server subprocess on loopback (fsync on every
commit), with its Prometheus endpoint on, whose ``tidemark_parked_tail_reads``
gauge says how many reads wait at a tail.

Parked reads: one writer makes ``--appends`` single-event appends of 100
bytes, one after the other, and ``--appends`` describes, first with no read
waiting (the peer in the same run), then with ``--parked`` ReadSegment calls
parked at the tails of a 64-segment stream (``wait_ms`` of 10 minutes, over
four connections; idle ticks are put off for the run, since a tick ends the
waits at a tail). Latency percentiles of both, their ratio, and how long
the parked reads take to be released once cancelled.

Writers and readers: ``--writers`` threads append batches of ``--batch``
100-byte events, each to its own segment of a stream of that many segments,
numbered for deduplication; ``--readers`` threads each follow a share of the
segments from offset 0 with tail reads (``wait_ms`` 500), for ``--seconds``.
Appended events/s, append latency percentiles, errors, and at the end every
acknowledged event read back: lost (acknowledged but missing), duplicated, and
segments whose events are not in the order acknowledged.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from bench._support import (
    BenchFailure,
    StoreServerProcess,
    free_port,
    percentile,
    positive,
)
from bench.figures import Target
from connector import StoreClient
from connector._proto import store_pb2 as pb
from connector._proto import store_pb2_grpc
from connector._wire import GRPC_OPTIONS
from connector.errors import TidemarkError
from connector.framing import iter_frames
from connector.reader.source import SegmentRange, read_range

__all__ = ["MixedResult", "ParkedResult", "StoreLoadFigures", "measure", "options"]

TARGET_APPEND_P99_MS = 50.0  # with 1,000 reads parked
_PAYLOAD = b"x" * 100
_PARKED_WAIT_MS = 600_000
_CONNECTIONS = 4


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(prog="store_load", description=__doc__.split("\n")[0])
    parser.add_argument("--parked", type=positive, default=1_000, help="reads parked (1000)")
    parser.add_argument("--appends", type=positive, default=2_000, help="appends timed (2000)")
    parser.add_argument("--writers", type=positive, default=16, help="writer threads (16)")
    parser.add_argument("--readers", type=positive, default=8, help="reader threads (8)")
    parser.add_argument("--batch", type=positive, default=10, help="events per append (10)")
    parser.add_argument("--seconds", type=float, default=60.0, help="mixed run (default 60)")
    return parser


class _Server:
    """A server subprocess with its metrics endpoint, and a reading of its parked reads."""

    def __init__(self, *extra_args: str) -> None:
        self.metrics = f"127.0.0.1:{free_port()}"
        self.process = StoreServerProcess("--metrics-listen", self.metrics, *extra_args)
        self.uri = self.process.uri
        self.address = self.uri.removeprefix("tidemark://")

    def parked_reads(self) -> int:
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith("tidemark_parked_tail_reads "):
                    return int(float(line.split()[1]))
        msg = "the server's metrics have no tidemark_parked_tail_reads"
        raise BenchFailure(msg)

    def wait_for_parked(self, count: int, timeout_s: float) -> float:
        """Seconds until exactly ``count`` reads are parked."""
        start = time.perf_counter()
        while (parked := self.parked_reads()) != count:
            if time.perf_counter() - start > timeout_s:
                msg = f"{parked} reads parked after {timeout_s} s, expected {count}"
                raise BenchFailure(msg)
            time.sleep(0.05)
        return time.perf_counter() - start


@contextlib.contextmanager
def _server(*extra_args: str) -> Iterator[_Server]:
    server = _Server(*extra_args)
    try:
        yield server
    finally:
        server.process.stop()


def _latencies(calls: int, call: Callable[[int], Any]) -> list[float]:
    seconds = []
    for n in range(calls):
        start = time.perf_counter()
        call(n)
        seconds.append(time.perf_counter() - start)
    return seconds


@dataclass
class ParkedResult:
    """Latencies of the parked-reads part, by ``none`` / ``parked``."""

    parked: int
    park_s: float
    release_s: float
    appends: dict[str, list[float]] = field(default_factory=dict)
    describes: dict[str, list[float]] = field(default_factory=dict)


def run_parked(args: argparse.Namespace) -> ParkedResult:
    """Append and describe latency with no read parked, then with ``--parked``."""
    # No idle tick in the run: a tick raises a tail's watermark, which rightly ends its waits.
    with _server("--max-watermark-lag-ms", "3600000") as server, StoreClient(server.uri) as client:
        client.create_scope("load")
        tails = [s.segment for s in client.create_stream("load", "idle", 64).segments]
        [target] = [s.segment for s in client.create_stream("load", "busy", 1).segments]
        numbers = iter(range(10**9))

        def append(_: int) -> None:
            client.append(target, "w", next(numbers), [_PAYLOAD])

        def describe(_: int) -> None:
            client.describe_stream("load", "busy")

        _latencies(100, append)  # warm the connection and the server up
        result = ParkedResult(args.parked, float("nan"), float("nan"))
        result.appends["none"] = _latencies(args.appends, append)
        result.describes["none"] = _latencies(args.appends, describe)
        options = [*GRPC_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
        channels = [grpc.insecure_channel(server.address, options=options) for _ in range(4)]
        try:
            stubs = [store_pb2_grpc.SegmentStoreStub(c) for c in channels]
            reads = [
                stubs[n % _CONNECTIONS].ReadSegment.future(
                    pb.ReadRequest(
                        segment=tails[n % len(tails)],
                        offset=0,
                        max_bytes=1024,
                        wait_ms=_PARKED_WAIT_MS,
                    )
                )
                for n in range(args.parked)
            ]
            result.park_s = server.wait_for_parked(args.parked, timeout_s=120)
            print(f"parked: {args.parked} reads wait at tails", flush=True)
            result.appends["parked"] = _latencies(args.appends, append)
            result.describes["parked"] = _latencies(args.appends, describe)
            if any(read.done() for read in reads):
                msg = "a parked read returned while nothing was written to its segment"
                raise BenchFailure(msg)
            start = time.perf_counter()
            for read in reads:
                read.cancel()
            server.wait_for_parked(0, timeout_s=60)
            result.release_s = time.perf_counter() - start
        finally:
            for channel in channels:
                channel.close()
    return result


@dataclass
class MixedResult:
    """The writers-and-readers part's figures."""

    seconds: float
    appended: int
    read: int
    errors: list[str]
    append_seconds: list[float]
    lost: int
    duplicated: int
    reordered: int


class _Writer(threading.Thread):
    def __init__(self, uri: str, segment: str, name: str, batch: int, stop: threading.Event):
        super().__init__(daemon=True, name=name)
        self.uri, self.segment, self.batch, self.stop = uri, segment, batch, stop
        self.acked: list[bytes] = []
        self.append_seconds: list[float] = []
        self.errors: list[str] = []

    def run(self) -> None:
        with StoreClient(self.uri, call_timeout_s=30.0) as client:
            number = 0
            while not self.stop.is_set():
                events = [
                    f"{self.name}#{number + i:09d}".encode().ljust(100, b".")
                    for i in range(self.batch)
                ]
                start = time.perf_counter()
                try:
                    client.append(self.segment, self.name, number, events)
                except TidemarkError as error:
                    self.errors.append(f"{self.name}: {error}")
                    return
                self.append_seconds.append(time.perf_counter() - start)
                self.acked += events
                number += self.batch


class _Reader(threading.Thread):
    def __init__(self, uri: str, segments: list[str], name: str, stop: threading.Event):
        super().__init__(daemon=True, name=name)
        self.uri, self.segments, self.stop = uri, segments, stop
        self.events = 0
        self.errors: list[str] = []

    def run(self) -> None:
        offsets = dict.fromkeys(self.segments, 0)
        with StoreClient(self.uri, call_timeout_s=30.0) as client:
            while not self.stop.is_set():
                for segment, offset in offsets.items():
                    try:
                        result = client.read(segment, offset, 1024 * 1024, wait_ms=500)
                    except TidemarkError as error:
                        self.errors.append(f"{self.name}: {error}")
                        return
                    self.events += sum(1 for _ in iter_frames(result.data))
                    offsets[segment] = result.next_offset


def run_mixed(args: argparse.Namespace) -> MixedResult:
    """``--writers`` writers and ``--readers`` tail readers for ``--seconds``, then a full check."""
    with _server() as server, StoreClient(server.uri) as client:
        client.create_scope("load")
        segments = [s.segment for s in client.create_stream("load", "mixed", args.writers).segments]
        stop = threading.Event()
        writers = [
            _Writer(server.uri, segments[n], f"w{n}", args.batch, stop) for n in range(args.writers)
        ]
        readers = [
            _Reader(server.uri, segments[n :: args.readers], f"r{n}", stop)
            for n in range(args.readers)
        ]
        start = time.perf_counter()
        for thread in [*readers, *writers]:
            thread.start()
        stop.wait(args.seconds)
        stop.set()
        for thread in [*writers, *readers]:
            thread.join(60)
        seconds = time.perf_counter() - start
        lost = duplicated = reordered = 0
        for writer in writers:
            end = client.segment_info(writer.segment).write_offset
            stored = [
                frame.payload
                for result in read_range(client, SegmentRange(writer.segment, 0, end))
                for frame in iter_frames(result.data)
            ]
            seen = set(stored)
            lost += sum(1 for event in writer.acked if event not in seen)
            duplicated += len(stored) - len(seen)
            # The segment is this writer's alone: it holds exactly what was acknowledged,
            # plus at most the batch in flight at the stop (none: each writer finished it).
            reordered += stored[: len(writer.acked)] != writer.acked
    return MixedResult(
        seconds=seconds,
        appended=sum(len(w.acked) for w in writers),
        read=sum(r.events for r in readers),
        errors=[e for t in [*writers, *readers] for e in t.errors],
        append_seconds=[s for w in writers for s in w.append_seconds],
        lost=lost,
        duplicated=duplicated,
        reordered=reordered,
    )


@dataclass(frozen=True)
class StoreLoadFigures:
    """The two parts' figures, and the settings they ran with."""

    appends: int
    writers: int
    readers: int
    batch: int
    connections: int
    parked: ParkedResult
    mixed: MixedResult
    software: tuple[str, ...] = ()

    @property
    def latencies(self) -> list[tuple[str, int, float, float, float]]:
        """(calls, reads parked, p50 ms, p99 ms, max ms), append then describe, none then parked."""
        rows = []
        for kind, figures in (("append", self.parked.appends), ("describe", self.parked.describes)):
            for state, parked in (("none", 0), ("parked", self.parked.parked)):
                seconds = figures[state]
                ms = [percentile(seconds, q) * 1000 for q in (50, 99)]
                rows.append((kind, parked, *ms, max(seconds) * 1000))
        return rows

    @property
    def parked_ratio(self) -> float:
        """Append p99 with the reads parked over append p99 without."""
        appends = self.parked.appends
        return percentile(appends["parked"], 99) / percentile(appends["none"], 99)

    @property
    def append_rate(self) -> float:
        """Events/s the writers appended, all together."""
        return self.mixed.appended / self.mixed.seconds

    @property
    def read_rate(self) -> float:
        """Events/s the tail readers read, all together."""
        return self.mixed.read / self.mixed.seconds

    @property
    def errors(self) -> int:
        """Calls of the writers and readers that failed."""
        return len(self.mixed.errors)

    @property
    def append_ms(self) -> dict[str, float]:
        """The writers' append latency, ms, at p50 and p99 (keys ``p50``, ``p99``)."""
        return {f"p{q}": percentile(self.mixed.append_seconds, q) * 1000 for q in (50, 99)}

    @property
    def targets(self) -> dict[str, Target]:
        """Append p99 with the reads parked."""
        p99 = percentile(self.parked.appends["parked"], 99) * 1000
        return {"append_p99_parked": Target(p99, "<", TARGET_APPEND_P99_MS, "ms")}


def measure(args: argparse.Namespace) -> StoreLoadFigures:
    """Both parts; raises :class:`BenchFailure` on an error, a lost or a misplaced event."""
    print(f"parked reads: {args.parked:,} ...", flush=True)
    parked = run_parked(args)
    print(f"writers and readers: {args.seconds:.0f} s ...", flush=True)
    mixed = run_mixed(args)
    for error in mixed.errors[:5]:
        print("error:", error)
    if mixed.errors or mixed.lost or mixed.duplicated or mixed.reordered:
        msg = (
            f"{len(mixed.errors)} errors, {mixed.lost} lost, {mixed.duplicated} duplicated, "
            f"{mixed.reordered} segments out of order"
        )
        raise BenchFailure(msg)
    return StoreLoadFigures(
        args.appends, args.writers, args.readers, args.batch, _CONNECTIONS, parked, mixed
    )
