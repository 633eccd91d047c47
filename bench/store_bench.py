"""Store benchmark: append and read N events, Tidemark vs Redis Streams.

    python -m bench.run store                    # 1,000,000 events of 100 bytes
    python -m bench.run store --events 100000 --skip-redis --no-write

Tidemark: a real server subprocess (``python -m connector.server``, fsync on
every commit) on loopback. One :class:`EventWriter` (its own batching: 1 MiB
or 20,000 events per append) writes every event, with no routing key unless
``--routing-key`` gives one, to a one-segment stream and flushes; then one
reader calls ``StoreClient.read`` from offset 0 until the segment is
exhausted and decodes every event with :mod:`connector.framing` (checksums
verified).

Redis: a ``redis-server`` subprocess on loopback (``--appendonly yes
--appendfsync everysec --save ""``). XADD of every event, pipelined in
batches (``transaction=False``); then XRANGE in pages until all are read.

Both readers count the events and compare a CRC-32 chained over every
payload in order with the one of the events written. The figures go to
``templates/store.md``, this benchmark's section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import redis

from bench._support import (
    BenchFailure,
    ChildProcess,
    StoreServerProcess,
    TimedEvents,
    positive,
    timed,
)
from bench.figures import Target
from connector import BytesSerializer, EventWriter, StoreClient, WriterConfig
from connector.framing import iter_frames

__all__ = ["Result", "StoreFigures", "measure", "options"]

TARGET_APPEND = 150_000
TARGET_READ = 400_000
CALL_TIMEOUT_S = 120.0


# --- small helpers --------------------------------------------------------------


@dataclass
class Phase(TimedEvents):
    """One timed phase: events moved, payload bytes, wall time and CPU on each side."""

    payload_bytes: int

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.seconds / 1e6


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _payloads(count: int, size: int, seed: int) -> tuple[list[bytes], int]:
    """``count`` distinct pseudo-random payloads and the CRC-32 chained over them in order."""
    blob = random.Random(seed).randbytes(count * size)
    payloads = [blob[i : i + size] for i in range(0, count * size, size)]
    checksum = 0
    for payload in payloads:
        checksum = zlib.crc32(payload, checksum)
    return payloads, checksum


def _check(system: str, count: int, checksum: int, expected_count: int, expected: int) -> None:
    if count != expected_count or checksum != expected:
        msg = (
            f"{system}: read {count} events with checksum {checksum:#010x}, "
            f"expected {expected_count} with {expected:#010x}"
        )
        raise BenchFailure(msg)


# --- the two systems -------------------------------------------------------------


@dataclass
class Result:
    """One system's two phases."""

    system: str
    append: Phase
    read: Phase


@dataclass(frozen=True)
class StoreFigures:
    """The figures of a run: Tidemark's phases, Redis's when measured, and the settings."""

    events: int
    event_size: int
    batch_bytes: int
    batch_events: int
    routing_key: str | None
    read_bytes: int
    redis_batch: int
    redis_page: int
    redis_server: str  # its version
    tidemark: Result
    redis: Result | None
    software: tuple[str, ...]

    @property
    def results(self) -> tuple[Result, ...]:
        """Tidemark's, then Redis's when measured."""
        return (self.tidemark,) if self.redis is None else (self.tidemark, self.redis)

    @property
    def append_ratio(self) -> float | None:
        """Tidemark's append events/s over Redis's."""
        return None if self.redis is None else self._ratio("append")

    @property
    def read_ratio(self) -> float | None:
        """Tidemark's read events/s over Redis's."""
        return None if self.redis is None else self._ratio("read")

    def _ratio(self, phase: str) -> float:
        return getattr(self.tidemark, phase).events_per_s / getattr(self.redis, phase).events_per_s

    @property
    def targets(self) -> dict[str, Target]:
        """Tidemark's rates, absolute and beside Redis's (not measured without Redis)."""
        redis_rate = {
            phase: None if self.redis is None else getattr(self.redis, phase).events_per_s
            for phase in ("append", "read")
        }
        append, read = self.tidemark.append.events_per_s, self.tidemark.read.events_per_s
        return {
            "append": Target(append, ">=", TARGET_APPEND, "events/s"),
            "read": Target(read, ">=", TARGET_READ, "events/s"),
            "append_vs_redis": Target(append, ">=", redis_rate["append"], "events/s"),
            "read_vs_redis": Target(read, ">=", redis_rate["read"], "events/s"),
        }


def run_tidemark(args: argparse.Namespace, payloads: list[bytes], expected: int) -> Result:
    """Appends through a server subprocess with one EventWriter, then reads it all back."""
    total = len(payloads) * args.event_size
    with (
        StoreServerProcess() as server,
        StoreClient(server.uri, retry_timeout_s=10, call_timeout_s=CALL_TIMEOUT_S) as client,
    ):
        client.create_scope("bench")
        description = client.create_stream("bench", "events", segment_count=1)
        segment = description.segments[0].segment
        config = WriterConfig(args.batch_bytes, args.batch_events)
        writer = EventWriter(
            client, "bench/events", BytesSerializer(), writer_id="bench-writer", config=config
        )

        write = writer.write_event
        key = args.routing_key
        with timed(server.pid) as append:
            for payload in payloads:
                write(payload, key)
            writer.close()

        count = 0
        checksum = 0
        offset = 0
        crc32 = zlib.crc32
        read = client.read
        with timed(server.pid) as reading:
            while True:
                result = read(segment, offset, max_bytes=args.read_bytes)
                if result.next_offset == offset:
                    break
                for frame in iter_frames(result.data, result.offset):
                    checksum = crc32(frame.payload, checksum)
                    count += 1
                offset = result.next_offset
        _check("tidemark", count, checksum, len(payloads), expected)
    return Result(
        "tidemark", Phase(len(payloads), append, total), Phase(len(payloads), reading, total)
    )


def _redis_binary(args: argparse.Namespace) -> str:
    binary = shutil.which(args.redis_server) or args.redis_server
    if not os.path.exists(binary):
        msg = f"redis-server not found ({args.redis_server!r}); pass --redis-server or --skip-redis"
        raise BenchFailure(msg)
    return binary


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.BusyLoadingError):
        return False


def run_redis(args: argparse.Namespace, payloads: list[bytes], expected: int) -> Result:
    """XADD pipelined in batches to a redis-server subprocess, then XRANGE in pages."""
    binary = _redis_binary(args)
    total = len(payloads) * args.event_size
    key = "bench:events"
    with tempfile.TemporaryDirectory(prefix="redis-bench-") as scratch:
        port = _free_port()
        argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", scratch,
                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                "--daemonize", "no", "--protected-mode", "yes", "--logfile", ""]  # fmt: skip
        log_path = os.path.join(scratch, "redis.log")
        with (
            ChildProcess(argv, log_path, name="redis-server", capture_stdout=False) as server,
            redis.Redis(
                host="127.0.0.1", port=port, socket_timeout=CALL_TIMEOUT_S, socket_connect_timeout=2
            ) as client,
        ):
            server.wait_until(lambda: _answers(client), "answering")

            batch = args.redis_batch
            with timed(server.pid) as append:
                pipe = client.pipeline(transaction=False)
                for start in range(0, len(payloads), batch):
                    for payload in payloads[start : start + batch]:
                        pipe.xadd(key, {b"p": payload})
                    pipe.execute()

            count = 0
            checksum = 0
            crc32 = zlib.crc32
            low: bytes | str = "-"
            with timed(server.pid) as reading:
                while True:
                    entries = client.xrange(key, min=low, max="+", count=args.redis_page)
                    if not entries:
                        break
                    for _, fields in entries:
                        checksum = crc32(fields[b"p"], checksum)
                        count += 1
                    low = b"(" + entries[-1][0]
            _check("redis", count, checksum, len(payloads), expected)
    return Result(
        "redis", Phase(len(payloads), append, total), Phase(len(payloads), reading, total)
    )


# --- what the section names ------------------------------------------------------


def _redis_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for word in out.stdout.split():
        if word.startswith("v="):
            return word[2:]
    return "unknown"


def _redis_parser() -> str:
    try:
        import hiredis  # noqa: F401
    except ImportError:
        return "with its pure-Python reply parser (hiredis not installed)"
    return "with the hiredis reply parser"


# --- entry point -----------------------------------------------------------------


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(
        prog="store_bench", description="Append and read N events: Tidemark vs Redis Streams."
    )
    parser.add_argument(
        "--events", type=positive, default=1_000_000, help="events (default 1000000)"
    )
    parser.add_argument(
        "--event-size", type=positive, default=100, help="payload bytes (default 100)"
    )
    parser.add_argument(
        "--batch-bytes",
        type=int,
        default=WriterConfig().max_batch_bytes,
        help="EventWriter max_batch_bytes (default 1 MiB)",
    )
    parser.add_argument(
        "--batch-events",
        type=int,
        default=WriterConfig().max_batch_events,
        help="EventWriter max_batch_events (default 20000)",
    )
    parser.add_argument(
        "--routing-key", default=None, help="routing key of every Tidemark event (default: none)"
    )
    parser.add_argument(
        "--read-bytes",
        type=int,
        default=1024 * 1024,
        help="max_bytes of each Tidemark read (default 1 MiB)",
    )
    parser.add_argument(
        "--redis-batch", type=int, default=10_000, help="XADDs per pipeline execute (default 10000)"
    )
    parser.add_argument(
        "--redis-page", type=int, default=10_000, help="COUNT of each XRANGE (default 10000)"
    )
    parser.add_argument("--redis-server", default="redis-server", help="redis-server binary")
    parser.add_argument("--skip-redis", action="store_true", help="measure Tidemark only")
    parser.add_argument("--seed", type=int, default=2024, help="payload generator seed")
    return parser


def measure(args: argparse.Namespace) -> StoreFigures:
    """Both systems, one after the other; raises :class:`BenchFailure` when a check fails."""
    if not args.skip_redis:
        _redis_binary(args)  # fail before the long Tidemark run, not after
    payloads, expected = _payloads(args.events, args.event_size, args.seed)
    runners: list[Callable[..., Result]] = [run_tidemark]
    if not args.skip_redis:
        runners.append(run_redis)
    results = []
    for runner in runners:
        name = runner.__name__.removeprefix("run_")
        print(f"{name}: appending and reading {args.events:,} events ...", flush=True)
        result = runner(args, payloads, expected)
        print(
            f"{name}: append {result.append.events_per_s:,.0f} events/s, "
            f"read {result.read.events_per_s:,.0f} events/s",
            flush=True,
        )
        results.append(result)
    return StoreFigures(
        events=args.events,
        event_size=args.event_size,
        batch_bytes=args.batch_bytes,
        batch_events=args.batch_events,
        routing_key=args.routing_key,
        read_bytes=args.read_bytes,
        redis_batch=args.redis_batch,
        redis_page=args.redis_page,
        redis_server=_redis_version(args.redis_server),
        tidemark=results[0],
        redis=results[1] if len(results) > 1 else None,
        software=(f"grpcio {grpc.__version__}", f"redis-py {redis.__version__} {_redis_parser()}"),
    )
