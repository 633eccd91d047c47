"""Store fault suite: kill -9, full disk, 30 idle days, a non-boundary read, a fuzz of every RPC.

    python -m bench.store_faults                 # everything, full length
    python -m bench.store_faults --cycles 3 --idle-days 1 --fuzz-seeds 1   # shorter
    python -m bench.store_faults --only idle fuzz

Run from the repository root. It prints its figures; its section of
RESULTS.md is written by hand.

Kill -9: a real server subprocess on loopback; two writers append batches of
five events (each numbered by its writer, no retries) to a two-segment stream
until the server is killed with SIGKILL at a random moment; the server is
restarted on the same data dir, every segment is read back and compared with
what was acknowledged (the batch in flight at the kill may or may not be
there, whole), then each writer retries its unanswered batch and goes on.
Lost = acknowledged events missing; duplicated = events stored more than once;
the last check compares each segment with every acknowledged event in order.

Full disk (needs root, for ``mount -t tmpfs``): the server's data dir is a
4 MiB tmpfs with a 1 MiB ballast file; a writer appends 16 KiB events until
the store refuses one with RESOURCE_EXHAUSTED, checks every acknowledged
event reads back, deletes the ballast and appends again without a restart,
then restarts the server and reads everything once more.

Idle restart: 50 idle one-segment streams ticked on a synthetic clock (in
process) for ``--idle-days`` at the default lag and journal compaction, then
the time a restart takes (the store opened in process, and a server process
started on the data dir until it answers a describe) and the records it replays.

Non-boundary read: a 256 MiB segment of four 64 MiB appends (in process); the
time and the bytes read to refuse a read one byte past an event boundary in
the middle of it.

Fuzz: ``--fuzz-seeds`` runs of ``--fuzz-calls`` seeded random and adversarial
calls of every RPC against a fresh server process each, every second one with
bearer tokens (``tests/faults/rpc_fuzz.py``, whose short run is in ``make
test``): no UNKNOWN or INTERNAL status, one-line short messages without paths,
the server up after every burst, nothing written outside the data dir, data
stored before the fuzz byte-identical after it and after a restart.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import threading
import time

from connector import StoreClient
from connector._wire import MAX_EVENTS_PER_APPEND
from connector.clock import ManualClock
from connector.errors import ResourceExhaustedError, TidemarkError
from connector.framing import iter_frames
from connector.reader.source import SegmentRange, read_range
from connector.store import SegmentStore, StoreConfig
from connector.store.file.journal import Journal
from tests.faults.rpc_fuzz import fuzz_server

_DAY_MS = 86_400_000


def start_server(
    data_dir: pathlib.Path, log: pathlib.Path, lag_ms: int | None = 600_000
) -> tuple[subprocess.Popen[bytes], str]:
    """A ``python -m connector.server`` on 127.0.0.1:0 and its URI (``lag_ms`` None: default)."""
    command = [sys.executable, "-m", "connector.server", "--data-dir", str(data_dir)]
    command += ["--listen", "127.0.0.1:0"]
    if lag_ms is not None:
        command += ["--idle-tick-after-ms", str(lag_ms)]
    with open(log, "ab") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err)
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    if not line.startswith("listening on "):
        msg = f"the server did not start: {line!r} (see {log})"
        raise RuntimeError(msg)
    return process, "tidemark://" + line.removeprefix("listening on ")


def read_all(client: StoreClient, segment: str) -> list[bytes]:
    """Every event of ``segment``, in order."""
    end = client.segment_info(segment).write_offset
    return [
        frame.payload
        for result in read_range(client, SegmentRange(segment, 0, end))
        for frame in iter_frames(result.data)
    ]


class Writer(threading.Thread):
    """Appends numbered batches of five to one segment until an append fails."""

    def __init__(self, uri: str, segment: str, name: str, first: int):
        super().__init__(daemon=True)
        self.uri, self.segment, self.writer, self.next = uri, segment, name, first
        self.acked: list[bytes] = []
        self.in_flight: list[bytes] = []

    def run(self) -> None:
        """Appends until the first failure (no retries: that batch is the one in flight)."""
        client = StoreClient(self.uri, retry_timeout_s=0.0, call_timeout_s=10.0)
        try:
            while True:
                events = [f"{self.writer}#{self.next + i}".encode() for i in range(5)]
                self.in_flight = events
                client.append(self.segment, self.writer, self.next, events)
                self.acked += events
                self.in_flight = []
                self.next += 5
        except TidemarkError:
            pass
        finally:
            client.close()


def kill_cycles(cycles: int, work: pathlib.Path) -> dict[str, int]:
    """Runs ``cycles`` kill -9 cycles; returns acknowledged, lost and duplicated counts."""
    data_dir, log = work / "kill", work / "kill.log"
    process, uri = start_server(data_dir, log)
    with StoreClient(uri, retry_timeout_s=5.0) as client:
        client.create_scope("f")
        segments = [s.segment for s in client.create_stream("f", "s", 2).segments]
    acked: dict[str, list[bytes]] = {s: [] for s in segments}
    numbers = dict.fromkeys(segments, 0)
    totals = dict.fromkeys(
        ["acknowledged", "lost", "duplicated", "out_of_order_segments", "in_flight_kept"], 0
    )
    totals["cycles"] = cycles
    rng = random.Random(7)
    for _ in range(cycles):
        writers = [Writer(uri, s, f"w{n}", numbers[s]) for n, s in enumerate(segments)]
        for writer in writers:
            writer.start()
        time.sleep(rng.uniform(0.3, 1.5))
        process.kill()
        process.wait()
        for writer in writers:
            writer.join(30)
        process, uri = start_server(data_dir, log)
        with StoreClient(uri, retry_timeout_s=5.0) as client:
            for writer in writers:
                acked[writer.segment] += writer.acked
                stored = read_all(client, writer.segment)
                expected = acked[writer.segment]
                kept = stored[len(expected) :] == writer.in_flight and writer.in_flight != []
                totals["in_flight_kept"] += kept
                totals["lost"] += len(set(expected) - set(stored))
                totals["duplicated"] += len(stored) - len(set(stored))
                if writer.in_flight:  # the writer retries its unanswered batch
                    client.append(writer.segment, writer.writer, writer.next, writer.in_flight)
                    acked[writer.segment] += writer.in_flight
                    writer.next += 5
                numbers[writer.segment] = writer.next
    with StoreClient(uri, retry_timeout_s=5.0) as client:
        for segment in segments:
            stored = read_all(client, segment)
            totals["lost"] += len(set(acked[segment]) - set(stored))
            totals["duplicated"] += len(stored) - len(set(stored))
            totals["acknowledged"] += len(acked[segment])
            totals["out_of_order_segments"] += stored != acked[segment]
    process.kill()
    process.wait()
    return totals


def full_disk(work: pathlib.Path) -> dict[str, object]:
    """Fills a 4 MiB tmpfs through the server; returns what was acknowledged, lost and resumed."""
    mount = work / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        ballast = mount / "ballast"
        ballast.write_bytes(b"\0" * (1 << 20))
        process, uri = start_server(mount / "data", work / "disk.log")
        acked: list[bytes] = []
        status = ""
        with StoreClient(uri, retry_timeout_s=0.0) as client:
            client.create_scope("f")
            client.create_stream("f", "s", 1)
            number = 0
            while True:
                event = f"{number:08d}".encode() * 2048
                try:
                    client.append("f/s/0", "w", number, [event])
                except ResourceExhaustedError as refused:
                    status = str(refused)
                    break
                acked.append(event)
                number += 1
            readable_when_full = read_all(client, "f/s/0") == acked
            ballast.unlink()
            started = time.monotonic()
            event = f"{number:08d}".encode() * 2048
            client.append("f/s/0", "w", number, [event])
            resumed_s = time.monotonic() - started
            acked.append(event)
        process.kill()
        process.wait()
        process, uri = start_server(mount / "data", work / "disk.log")
        with StoreClient(uri, retry_timeout_s=5.0) as client:
            after_restart = read_all(client, "f/s/0")
        process.kill()
        process.wait()
        return {
            "acknowledged": len(acked),
            "lost": len(set(acked) - set(after_restart)),
            "readable_when_full": readable_when_full,
            "resumed_without_restart_s": round(resumed_s, 3),
            "restart_ok": after_restart == acked,
            "refusal": status,
        }
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def idle_restart(work: pathlib.Path, days: float) -> dict[str, object]:
    """50 idle one-segment streams ticked for ``days`` on a synthetic clock, then restarted.

    One round is one idle tick of every segment, ``max_watermark_lag_ms`` + 1
    apart, as the idle advancer gives them at the default settings (10 s lag):
    30 days are 259,175 rounds, 12,958,750 ticks. Compaction is as configured
    by default. The restart is timed after ``days``, then once more at the
    worst point of the compaction cycle: ticked on until a compaction, then
    until the journal is one round short of the next one.
    """
    clock = ManualClock(1_000)
    config = StoreConfig(str(work / "idle"), clock=clock, polling_period_ms=None)
    lag = config.max_watermark_lag_ms
    rounds = math.ceil(days * _DAY_MS / (lag + 1))
    store = SegmentStore(config)
    store.create_scope("idle")
    for number in range(50):
        store.create_stream("idle", f"s{number}", 1)
    started = time.monotonic()
    ticks = 0
    for _ in range(rounds):
        clock.advance(lag + 1)
        ticks += store.advance_idle_segments()
    ticking_s = time.monotonic() - started
    store.close()
    after_days = _timed_restart(config, work)

    store = SegmentStore(config)
    size = store.journal_size()
    while store.journal_size() >= size:  # on to the next compaction
        size = store.journal_size()
        clock.advance(lag + 1)
        store.advance_idle_segments()
    snapshot_records = 51  # the scope and the 50 streams
    for _ in range((config.compact_after_records - snapshot_records) // 50 - 1):
        clock.advance(lag + 1)
        store.advance_idle_segments()
    store.close()
    worst = _timed_restart(config, work)
    return {
        "idle_days": days,
        "rounds": rounds,
        "idle_ticks_written": ticks,
        "ticking_s": round(ticking_s, 1),
        "after_the_idle_days": after_days,
        "worst_point_of_the_compaction_cycle": worst,
    }


def _timed_restart(config: StoreConfig, work: pathlib.Path) -> dict[str, object]:
    """Restarts the idle store in process and as a server process; what that took."""
    store = SegmentStore(config)
    watermarks = [store.segment_info(f"idle/s{n}/0").watermark for n in range(50)]
    journal_bytes = store.journal_size()
    store.close()
    journal = Journal(os.path.join(config.data_dir, "journal.log"))
    records = sum(1 for _ in journal.replay())
    journal.close()
    started = time.monotonic()
    store = SegmentStore(config)
    restart_s = time.monotonic() - started
    same = watermarks == [store.segment_info(f"idle/s{n}/0").watermark for n in range(50)]
    store.close()
    started = time.monotonic()
    process, uri = start_server(pathlib.Path(config.data_dir), work / "idle.log", lag_ms=None)
    with StoreClient(uri, retry_timeout_s=5.0) as client:
        served = [s.segment for s in client.describe_stream("idle", "s49").segments]
    process_s = time.monotonic() - started
    process.kill()
    process.wait()
    return {
        "journal_records": records,
        "journal_bytes": journal_bytes,
        "restart_in_process_s": round(restart_s, 3),
        "server_process_start_to_first_answer_s": round(process_s, 3),
        "served": served == ["idle/s49/0"],
        "watermarks_same": same,
    }


def boundary_check(work: pathlib.Path, batches: int = 4, repeats: int = 20) -> dict[str, object]:
    """The cost of refusing a read at a non-boundary offset in the middle of a 256 MiB segment.

    The segment is ``batches`` appends of 100,000 events of 653 bytes (64 MiB
    each, the most one append can carry over gRPC); the offset is one byte past
    the last event's start of the middle append (the farthest from any append
    boundary). Bytes are counted where the store reads its data files.
    """
    from connector.errors import InvalidArgumentError
    from connector.store.file.segment import Segment

    store = SegmentStore(StoreConfig(str(work / "boundary"), polling_period_ms=None))
    store.create_scope("b")
    store.create_stream("b", "s", 1)
    event = 653
    for batch in range(batches):
        events = [bytes([batch]) * event] * MAX_EVENTS_PER_APPEND
        store.append("b/s/0", "w", batch * MAX_EVENTS_PER_APPEND, events)
    size = store.segment_info("b/s/0").write_offset
    frame = size // (batches * MAX_EVENTS_PER_APPEND)
    offset = (batches // 2 * MAX_EVENTS_PER_APPEND - 1) * frame + 1
    counted: list[int] = []
    read_bytes = Segment.read_bytes

    def counting(segment: Segment, start: int, stop: int) -> bytes:
        data = read_bytes(segment, start, stop)
        counted.append(len(data))
        return data

    Segment.read_bytes = counting  # type: ignore[method-assign]
    timings = []
    try:
        for _ in range(repeats):
            counted.clear()
            started = time.perf_counter()
            try:
                store.read("b/s/0", offset, max_bytes=1)
            except InvalidArgumentError:
                pass
            timings.append(time.perf_counter() - started)
    finally:
        Segment.read_bytes = read_bytes  # type: ignore[method-assign]
        store.close()
    timings.sort()
    return {
        "segment_bytes": size,
        "offset": offset,
        "bytes_read_per_check": sum(counted),
        "check_ms_median": round(timings[len(timings) // 2] * 1000, 3),
        "check_ms_max": round(timings[-1] * 1000, 3),
    }


def fuzz(work: pathlib.Path, seeds: int, calls: int) -> dict[str, object]:
    """``seeds`` fuzz runs of ``calls`` calls each (bursts of 500), each on a fresh server.

    Every second run's server checks bearer tokens (one call in four then
    carries a token without the right it needs, or a wrong one).
    """
    reports = [
        fuzz_server(
            work / f"fuzz-{seed}", seed, max(1, calls // 500), min(calls, 500), tokens=seed % 2 == 0
        )
        for seed in range(1, seeds + 1)
    ]
    codes: dict[str, int] = {}
    for report in reports:
        for code, count in report.stats.by_code.items():
            codes[code] = codes.get(code, 0) + count
    return {
        "seeds": [r.seed for r in reports],
        "seeds_with_tokens": [r.seed for r in reports if r.seed % 2 == 0],
        "calls": sum(r.stats.calls for r in reports),
        "rpcs": len({rpc for r in reports for rpc in r.stats.by_rpc}),
        "codes": dict(sorted(codes.items(), key=lambda item: -item[1])),
        "problems": [p for r in reports for p in r.problems][:20],
        "seconds": round(sum(r.seconds for r in reports), 1),
    }


def main() -> None:
    """Runs the parts asked for (all by default), printing the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = ("kill", "disk", "idle", "boundary", "fuzz")
    parser.add_argument("--only", nargs="+", choices=parts, default=parts, help="parts to run")
    parser.add_argument("--cycles", type=int, default=20, help="kill -9 cycles (default 20)")
    parser.add_argument("--idle-days", type=float, default=30, help="idle time (default 30)")
    parser.add_argument("--fuzz-seeds", type=int, default=5, help="fuzz runs (default 5)")
    parser.add_argument("--fuzz-calls", type=int, default=10_000, help="calls per fuzz run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidemark-faults-") as work:
        started = time.monotonic()
        if "kill" in args.only:
            print("kill -9:", kill_cycles(args.cycles, pathlib.Path(work)), flush=True)
        if "disk" in args.only:
            print("full disk:", full_disk(pathlib.Path(work)), flush=True)
        if "idle" in args.only:
            print("idle restart:", idle_restart(pathlib.Path(work), args.idle_days), flush=True)
        if "boundary" in args.only:
            print("non-boundary read:", boundary_check(pathlib.Path(work)), flush=True)
        if "fuzz" in args.only:
            print("fuzz:", fuzz(pathlib.Path(work), args.fuzz_seeds, args.fuzz_calls), flush=True)
        print(f"took {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
