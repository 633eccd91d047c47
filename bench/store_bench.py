"""Store benchmark: append and read N events, Tidemark vs Redis Streams.

    python bench/run.py store                    # 1,000,000 events of 100 bytes
    python bench/store_bench.py --events 100000  # the same, run directly

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
payload in order with the one of the events written. The figures go to the
console and to this benchmark's section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
import redis  # noqa: E402
from _support import (  # noqa: E402
    BenchFailure,
    ChildProcess,
    StoreServerProcess,
    TimedEvents,
    command_block,
    load_average,
    machine_facts,
    markdown_table,
    print_table,
    run_and_record,
    timed,
)

from connector import BytesSerializer, EventWriter, StoreClient, WriterConfig  # noqa: E402
from connector.framing import iter_frames  # noqa: E402

__all__ = ["main"]

SECTION = "store"
HEADING = "Store: append and read, Tidemark vs Redis Streams"
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
    system: str
    append: Phase
    read: Phase
    note: str


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
    keys = "no routing key"
    if args.routing_key:
        keys = f"routing key {args.routing_key!r} on every event"
    note = (
        f"EventWriter batching (max {args.batch_bytes:,} bytes / {args.batch_events:,} events "
        f"per append), {keys}; reads of max_bytes={args.read_bytes:,}, decoded with "
        "framing.iter_frames"
    )
    return Result(
        "tidemark", Phase(len(payloads), append, total), Phase(len(payloads), reading, total), note
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
    note = (
        f"XADD pipelined {batch:,} per batch (transaction=False); "
        f"XRANGE pages of COUNT {args.redis_page:,}"
    )
    return Result(
        "redis", Phase(len(payloads), append, total), Phase(len(payloads), reading, total), note
    )


# --- reporting -------------------------------------------------------------------


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


def _machine() -> str:
    return machine_facts(
        f"grpcio {grpc.__version__}", f"redis-py {redis.__version__} {_redis_parser()}"
    )


def _table(results: Sequence[Result]) -> list[list[str]]:
    rows = [
        [
            "system",
            "append events/s",
            "append MB/s",
            "read events/s",
            "read MB/s",
            "append s",
            "read s",
            "append CPU s client / server",
            "read CPU s client / server",
        ]
    ]
    for r in results:
        rows.append(
            [
                r.system,
                f"{r.append.events_per_s:,.0f}",
                f"{r.append.mb_per_s:.1f}",
                f"{r.read.events_per_s:,.0f}",
                f"{r.read.mb_per_s:.1f}",
                f"{r.append.seconds:.2f}",
                f"{r.read.seconds:.2f}",
                r.append.timing.cpu_text(),
                r.read.timing.cpu_text(),
            ]
        )
    return rows


def _verdicts(tidemark: Result, redis_result: Result | None) -> list[tuple[str, bool | None]]:
    checks: list[tuple[str, bool | None]] = [
        (f"append >= {TARGET_APPEND:,} events/s", tidemark.append.events_per_s >= TARGET_APPEND),
        (f"read >= {TARGET_READ:,} events/s", tidemark.read.events_per_s >= TARGET_READ),
    ]
    for phase in ("append", "read"):
        ok = None
        if redis_result is not None:
            ok = getattr(tidemark, phase).events_per_s >= getattr(redis_result, phase).events_per_s
        checks.append((f"{phase} not slower than Redis", ok))
    return checks


def _report(args: argparse.Namespace, results: list[Result]) -> str:
    tidemark = results[0]
    redis_result = results[1] if len(results) > 1 else None
    rows = _table(results)
    print()
    print(f"{args.events:,} events of {args.event_size} bytes, one writer then one reader")
    print_table(rows)
    ratios = ""
    if redis_result is not None:
        append_ratio = tidemark.append.events_per_s / redis_result.append.events_per_s
        read_ratio = tidemark.read.events_per_s / redis_result.read.events_per_s
        ratios = f"tidemark/redis: append {append_ratio:.2f}x, read {read_ratio:.2f}x"
        print(ratios)
    print(f"load average (1 min): before {args.load_before:.2f}, after {load_average():.2f}")
    verdicts = _verdicts(tidemark, redis_result)
    mark = {True: "met", False: "MISSED", None: "not measured"}
    for target, ok in verdicts:
        print(f"target {target}: {mark[ok]}")

    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    lines = [
        f"## {HEADING}",
        "",
        f"Measured {today} on {_machine()}; redis-server {_redis_version(args.redis_server)}.",
        "",
        *command_block(),
        "",
        f"Workload: {args.events:,} events of {args.event_size} bytes (distinct pseudo-random "
        "payloads), appended by one writer over loopback and then read back by one reader from "
        "the start. Each reader counts the events and checks a CRC-32 chained over every payload "
        "in order against the one written. MB/s counts payload bytes (1 MB = 10^6 bytes). CPU "
        "seconds are those the client (the benchmark process) and the server process used during "
        "the phase; the machine has "
        f"{os.cpu_count()} cores, so client and server compete for them. Load average (1 min) "
        f"before the run {args.load_before:.2f}, after {load_average():.2f}: other work on the "
        "machine slows both systems.",
        "",
    ]
    for r in results:
        lines.append(f"- **{r.system}**: {r.note}.")
    lines += [
        "- Durability differs: Tidemark answers an append only after fdatasync of the data and "
        "the journal (group commit); Redis with `--appendfsync everysec` answers before its "
        "fsync, which runs once a second.",
        "- Both systems are driven from Python, so each client library's per-event work is part "
        "of the figures (compare the client CPU seconds with the wall time); redis-py parses "
        "replies in C only when hiredis is installed, and the line above says which parser ran.",
        "",
        markdown_table(rows),
        "",
    ]
    if ratios:
        lines += [f"Ratios, {ratios}.", ""]
    lines += ["Targets for Tidemark:", ""]
    lines += [f"- {target}: **{mark[ok]}**" for target, ok in verdicts]
    return "\n".join(lines)


# --- entry point -----------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="store_bench", description="Append and read N events: Tidemark vs Redis Streams."
    )
    parser.add_argument("--events", type=int, default=1_000_000, help="events (default 1000000)")
    parser.add_argument("--event-size", type=int, default=100, help="payload bytes (default 100)")
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
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument("--seed", type=int, default=2024, help="payload generator seed")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; 0 when every check passed, 1 when one failed."""
    args = _parser().parse_args(argv)
    if args.events <= 0 or args.event_size <= 0:
        print("--events and --event-size must be > 0", file=sys.stderr)
        return 2
    return run_and_record(SECTION, lambda: _run(args), write=not args.no_write)


def _run(args: argparse.Namespace) -> str:
    """Both systems, one after the other; returns the markdown section."""
    if not args.skip_redis:
        _redis_binary(args)  # fail before the long Tidemark run, not after
    args.load_before = load_average()
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
    return _report(args, results)


if __name__ == "__main__":
    sys.exit(main())
