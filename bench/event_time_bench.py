"""Event time from the writers: what assertions cost the store, and how fast readers see them.

    python bench/run.py event_time                      # every part, default settings
    python bench/event_time_bench.py --parts latency    # run directly, one part only

a. **throughput**: ``--writers`` writer threads append batches of
   ``--batch`` events of 100 bytes (each to a segment of its own of one
   stream, ``StoreClient.append``, as fast as the store acknowledges) for
   ``--seconds``; in the asserting runs each writer also asserts its event
   time every ``--assert-every-ms``, in one of three ways (``HOW``): from a
   timer thread beside the writer (``StoreClient.assert_watermark``), from
   the writer's thread between appends (the same call), or riding on the
   writer's next append (``StoreClient.append(..., assertion=...)``, as
   ``EventWriter.note_time`` does when events are queued). Runs alternate,
   ``--repetitions`` each; the figure is the ratio of the median events/s
   (target >= 0.95). Server: a subprocess, fsync on every commit.
b. **journal**: one writer asserts every ``--assert-every-ms`` for
   ``--journal-seconds`` (with an append of 10 events every 100 ms beside),
   against a store in this process compacting after ``--compact-after``
   journal records (the file store's default is 20,000); the journal's size is
   sampled every 100 ms. Bytes per assertion, the largest journal seen, and
   what an hour of assertions is with compaction (bounded) and without.
c. **latency**: one writer appends 10 events every 10 ms to a 2-segment
   stream and asserts its event time after each append; one reader in the
   event-time domain records the wall time of every watermark read. Latency
   of an assertion = wall time of the first watermark read ``W >= T`` (its
   event time) minus the wall time ``assert_watermark`` returned (target
   p99 < 50 ms). Server: a subprocess.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _support import (  # noqa: E402
    BenchFailure,
    StoreServerProcess,
    command_block,
    load_average,
    machine_facts,
    markdown_table,
    percentile,
    print_table,
    run_and_record,
)

from connector import JsonSerializer, StoreClient  # noqa: E402
from connector.model import Assertion  # noqa: E402
from connector.reader import (  # noqa: E402
    FieldTimestampAssigner,
    ReaderConfig,
    ReaderGroupManager,
    TimeDomain,
)
from connector.server import StoreServer  # noqa: E402
from connector.store import StoreConfig  # noqa: E402

__all__ = ["main"]

SECTION = "event_time"
HEADING = "Event time from the writers: assertions' cost and watermark latency"
TARGET_RATIO = 0.95
TARGET_LATENCY_P99_MS = 50.0
SCOPE = "bench"
PARTS = ("throughput", "journal", "latency")
#: How the asserting runs assert, and how the results say it.
HOW = {
    "beside": "Assertions from a timer thread beside each writer (separate calls)",
    "between": "Assertions from the writer's own thread, separate calls between appends",
    "riding": "Assertions riding on the writer's next append (as `EventWriter.note_time` "
    "sends them when events are queued)",
}
EVENT = b"x" * 100


@dataclass
class _Run:
    asserting: bool
    events: int = 0
    assertions: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def _throughput_run(
    uri: str, stream: str, args: argparse.Namespace, asserting: bool, how: str
) -> _Run:
    """``--writers`` threads appending for ``--seconds`` (and asserting); events/s.

    ``how`` (a key of :data:`HOW`): each writer's assertions come from a
    thread of their own (a timer beside the writer), from the writer's thread
    between appends, or ride on the writer's next append.
    """
    run = _Run(asserting)
    lock = threading.Lock()
    beside = how == "beside"
    start = threading.Barrier(args.writers * (2 if asserting and beside else 1) + 1)
    deadline: list[float] = []
    scope, name = stream.split("/")
    progress = [0] * args.writers  # each writer's events so far: the time it asserts

    def assert_every(client: StoreClient, writer_id: str, count: list[int], index: int) -> None:
        client.assert_watermark(scope, name, writer_id, count[0], progress[index])
        count[0] += 1

    def write(index: int, writer_id: str) -> None:
        segment = f"{stream}/{index}"
        number = events = 0
        assertions = [0]
        batch = [EVENT] * args.batch
        with StoreClient(uri) as client:
            start.wait()
            next_assert = time.monotonic()
            while time.monotonic() < deadline[0]:
                due = asserting and not beside and time.monotonic() >= next_assert
                if due and how == "riding":  # what this writer stored so far, then this batch
                    riding = Assertion(assertions[0], number + len(batch))
                    client.append(segment, writer_id, number, batch, assertion=riding)
                    assertions[0] += 1
                else:
                    client.append(segment, writer_id, number, batch)
                number += len(batch)
                events += len(batch)
                progress[index] = number
                if due and how == "between":
                    assert_every(client, writer_id, assertions, index)
                if due:
                    next_assert += args.assert_every_ms / 1000
        with lock:
            run.events += events
            run.assertions += assertions[0]

    def assert_beside(index: int, writer_id: str) -> None:
        assertions = [0]
        with StoreClient(uri) as client:
            start.wait()
            next_assert = time.monotonic()
            while time.monotonic() < deadline[0]:
                assert_every(client, writer_id, assertions, index)
                next_assert += args.assert_every_ms / 1000
                time.sleep(max(0.0, next_assert - time.monotonic()))
        with lock:
            run.assertions += assertions[0]

    threads = []
    for index in range(args.writers):
        writer_id = f"w{index}-{time.monotonic_ns()}"
        threads.append(threading.Thread(target=write, args=(index, writer_id)))
        if asserting and beside:
            threads.append(threading.Thread(target=assert_beside, args=(index, writer_id)))
    for thread in threads:
        thread.start()
    deadline.append(time.monotonic() + args.seconds)
    began = time.monotonic()
    start.wait()
    for thread in threads:
        thread.join()
    run.seconds = time.monotonic() - began
    return run


def _throughput(args: argparse.Namespace) -> list[str]:
    lines = [
        "### a. Append throughput with and without assertions",
        "",
        f"Workload: {args.writers} writer threads, each appending batches of {args.batch} events "
        f"of 100 bytes to a segment of its own (one {args.writers}-segment stream) as fast as the "
        f"store acknowledges, for {args.seconds} s; asserting runs also assert each writer's "
        f"event time every {args.assert_every_ms} ms (an assertion reaches all "
        f"{args.writers} segments). Runs alternate, {args.repetitions} of each; a server "
        "subprocess, fsync on every commit. Three ways to assert: from a thread beside each "
        "writer (a timer: each assertion is a call and a commit of its own), from the "
        "writer's own thread between appends (the writer also waits for each assertion's "
        "round trip), and riding on the writer's next append (no call or commit of its own: "
        "what `EventWriter.note_time` and `assert_watermarks_from` do when events are queued).",
        "",
    ]
    for how in args.how:
        runs: list[_Run] = []
        with StoreServerProcess("--max-watermark-lag-ms", "600000") as server:
            with StoreClient(server.uri) as client:
                client.create_scope(SCOPE)
                for repetition in range(args.repetitions):
                    for asserting in (repetition % 2 == 0, repetition % 2 == 1):
                        stream = f"t{len(runs)}"
                        client.create_stream(SCOPE, stream, args.writers)
                        run = _throughput_run(server.uri, f"{SCOPE}/{stream}", args, asserting, how)
                        runs.append(run)
                        print(
                            f"  {'asserting' if asserting else 'plain'} ({how}): "
                            f"{run.rate:,.0f} events/s, {run.assertions} assertions",
                            flush=True,
                        )
        plain = statistics.median(r.rate for r in runs if not r.asserting)
        asserting = statistics.median(r.rate for r in runs if r.asserting)
        ratio = asserting / plain
        rows = [["run", "writers", "assertions", "events/s", "assertions/s"]]
        for i, run in enumerate(runs, 1):
            rows.append(
                [
                    str(i),
                    "asserting" if run.asserting else "plain",
                    f"{run.assertions:,}",
                    f"{run.rate:,.0f}",
                    f"{run.assertions / run.seconds:,.0f}",
                ]
            )
        print_table(rows)
        met = "met" if ratio >= TARGET_RATIO else "NOT met"
        lines += [
            f"{HOW[how]}:",
            "",
            markdown_table(rows),
            "",
            f"Medians: plain {plain:,.0f} events/s, asserting {asserting:,.0f} events/s; "
            f"ratio **{ratio:.3f}** (target >= {TARGET_RATIO}: **{met}**).",
            "",
        ]
    return lines


def _journal(args: argparse.Namespace) -> list[str]:
    samples: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory(prefix="tidemark-bench-") as folder:
        config = StoreConfig(
            data_dir=os.path.join(folder, "data"),
            compact_after_records=args.compact_after,
            max_watermark_lag_ms=600_000,
        )
        with StoreServer(config) as server, StoreClient(server.uri) as client:
            client.create_scope(SCOPE)
            client.create_stream(SCOPE, "journal", 2)
            store = server.store
            began = time.monotonic()
            assertions = appended = 0
            next_append = began
            while time.monotonic() - began < args.journal_seconds:
                client.assert_watermark(SCOPE, "journal", "w", assertions, assertions)
                assertions += 1
                if time.monotonic() >= next_append:
                    client.append(
                        f"{SCOPE}/journal/{appended % 2}", "a", appended // 2 * 10, [EVENT] * 10
                    )
                    appended += 1
                    next_append += 0.1
                if not samples or time.monotonic() - samples[-1][0] - began >= 0.1:
                    samples.append((time.monotonic() - began, store.journal_size()))
                time.sleep(
                    max(0.0, began + assertions * args.assert_every_ms / 1000 - time.monotonic())
                )
            seconds = time.monotonic() - began
            final = store.journal_size()
            segments = [store.engine.segment(f"{SCOPE}/journal/{n}") for n in (0, 1)]
            index = max(len(segment.event_index_entries()[0]) for segment in segments)
    largest = max(size for _, size in samples)
    # Bytes per assertion: the journal's growth between samples (compactions left out).
    growth = [b - a for (_, a), (_, b) in zip(samples, samples[1:], strict=False) if b > a]
    per_assertion = statistics.median(growth) / (0.1 * 1000 / args.assert_every_ms) if growth else 0
    per_hour = 3600 * 1000 / args.assert_every_ms
    return [
        "### b. Journal growth with assertions",
        "",
        f"Workload: one writer asserting every {args.assert_every_ms} ms for {seconds:.1f} s "
        f"({assertions:,} assertions) on a 2-segment stream, with an append of 10 events every "
        f"100 ms beside ({appended:,} appends); a store in this process compacting after "
        f"{args.compact_after:,} journal records; journal size sampled every 100 ms.",
        "",
        markdown_table(
            [
                [
                    "bytes per assertion",
                    "largest journal",
                    "journal at the end",
                    "event-time index entries",
                ],
                [f"{per_assertion:,.0f}", f"{largest:,} B", f"{final:,} B", f"{index:,}"],
            ]
        ),
        "",
        f"An hour of one writer asserting every {args.assert_every_ms} ms is {per_hour:,.0f} "
        f"assertions: {per_hour * per_assertion / 2**20:,.0f} MiB of journal without compaction; "
        f"with it the journal stays below about twice its compaction threshold in records plus "
        f"the snapshot ({largest:,} B here). The event-time index (one entry per change of a "
        "segment's value between appends) lives in the snapshot, as the watermark index does.",
        "",
    ]


@dataclass
class _Seen:
    marks: list[tuple[float, int]] = field(default_factory=list)


def _latency(args: argparse.Namespace) -> list[str]:
    with StoreServerProcess("--max-watermark-lag-ms", "600000") as server:
        client = StoreClient(server.uri)
        client.create_scope(SCOPE)
        client.create_stream(SCOPE, "latency", 2)
        group = ReaderGroupManager(client).create_reader_group(SCOPE, "g", [f"{SCOPE}/latency"])
        config = ReaderConfig(
            time_domain=TimeDomain.EVENT_TIME, timestamp_assigner=FieldTimestampAssigner("t")
        )
        reader = group.create_reader("r", JsonSerializer(), config)
        seen = _Seen()
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                got = reader.read_next_event(100)
                if got is not None and got.is_watermark:
                    seen.marks.append((time.time(), got.watermark))

        thread = threading.Thread(target=read)
        thread.start()
        acks: list[tuple[int, float]] = []
        serializer = JsonSerializer()
        began = time.monotonic()
        tick = 0
        while time.monotonic() - began < args.latency_seconds:
            tick += 1
            t = 1_000_000 + tick * 10
            events = [serializer.serialize({"t": t}) for _ in range(10)]
            client.append(f"{SCOPE}/latency/{tick % 2}", f"w{tick % 2}", _numbers(tick), events)
            client.assert_watermark(SCOPE, "latency", "w", tick, t)
            acks.append((t, time.time()))
            time.sleep(max(0.0, began + tick * args.interval_ms / 1000 - time.monotonic()))
        time.sleep(0.5)
        stop.set()
        thread.join()
        reader.close()
        client.close()
    latencies = []
    marks = seen.marks
    for t, acked in acks:
        first = next((wall for wall, mark in marks if mark >= t), None)
        if first is not None:
            latencies.append((first - acked) * 1000)
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    print(f"  latency: {len(latencies)} assertions, p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    met = "met" if p99 < TARGET_LATENCY_P99_MS else "NOT met"
    return [
        "### c. Event-time watermark latency under steady writes",
        "",
        f"Workload: a 2-segment stream; every {args.interval_ms} ms (fixed schedule, real clock) "
        f"an append of 10 JSON events (alternating segments) and then an assertion of the "
        f"events' time (`StoreClient.assert_watermark`), for {args.latency_seconds} s: "
        f"{len(acks):,} assertions. One reader, event-time domain, in a thread, timestamps every "
        f"watermark read with `time.time()` ({len(marks):,} watermark reads). Latency of an "
        "assertion = wall time of the first watermark read `W >=` its time, minus the wall time "
        "`assert_watermark` returned (a server subprocess).",
        "",
        markdown_table(
            [
                ["assertions measured", "p50 ms", "p99 ms", "max ms"],
                [f"{len(latencies):,}", f"{p50:.1f}", f"{p99:.1f}", f"{max(latencies):.1f}"],
            ]
        ),
        "",
        f"Target p99 < {TARGET_LATENCY_P99_MS:.0f} ms: **{met}**.",
        "",
    ]


def _numbers(tick: int) -> int:
    """The first event number of append ``tick`` (ticks alternate between two writers)."""
    return ((tick - 1) // 2) * 10


def _run(args: argparse.Namespace, parts: Sequence[str]) -> str:
    load_before = load_average()
    lines = [f"## {HEADING}", ""]
    body: list[str] = []
    if "throughput" in parts:
        body += _throughput(args)
    if "journal" in parts:
        body += _journal(args)
    if "latency" in parts:
        body += _latency(args)
    load_after = load_average()
    lines += [
        f"Measured {time.strftime('%Y-%m-%d')} on {machine_facts()}. Load average (1 min) "
        f"before the run {load_before:.2f}, after {load_after:.2f}: other developers' test runs "
        "share the 2 cores, and every figure here moves with them.",
        "",
        *command_block(),
        "",
        *body,
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the parts asked for and records their figures."""
    parser = argparse.ArgumentParser(prog="event_time_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--assert-every-ms", type=int, default=10)
    parser.add_argument("--how", nargs="+", choices=list(HOW), default=list(HOW))
    parser.add_argument("--journal-seconds", type=float, default=30.0)
    parser.add_argument("--compact-after", type=int, default=1_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--interval-ms", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    if args.writers < 1 or args.repetitions < 1:
        msg = "--writers and --repetitions must be >= 1"
        raise BenchFailure(msg)
    return run_and_record(SECTION, lambda: _run(args, args.parts), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
