"""Event time from the writers: what assertions cost the store, and how fast readers see them.

    python -m bench.run event_time                      # every part, default settings
    python -m bench.run event_time --parts latency      # one part only

a. **throughput**: ``--writers`` writer threads append batches of
   ``--batch`` events of 100 bytes (each to a segment of its own of one
   stream, ``StoreClient.append``, as fast as the store acknowledges) for
   ``--seconds``; in the asserting runs each writer also asserts its event
   time every ``--assert-every-ms``, in one of three ways (:data:`HOW`): from a
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
import tempfile
import threading
import time
from dataclasses import dataclass, field

from bench._support import (
    BenchFailure,
    StoreServerProcess,
)
from bench.figures import Percentiles, Target
from connector import JsonSerializer, StoreClient
from connector.model import Assertion
from connector.reader import (
    FieldTimestampAssigner,
    ReaderConfig,
    ReaderGroupManager,
    TimeDomain,
)
from connector.server import StoreServer
from connector.store import StoreConfig

__all__ = ["EventTimeFigures", "measure", "options"]

TARGET_RATIO = 0.95
TARGET_LATENCY_P99_MS = 50.0
SCOPE = "bench"
PARTS = ("throughput", "journal", "latency")
#: How the asserting runs assert: from a timer thread beside each writer (separate calls),
#: from the writer's own thread between appends, or riding on the writer's next append.
HOW = ("beside", "between", "riding")
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

    @property
    def assertions_per_s(self) -> float:
        return self.assertions / self.seconds

    @property
    def kind(self) -> str:
        """``asserting`` or ``plain``."""
        return "asserting" if self.asserting else "plain"


@dataclass(frozen=True)
class Asserting:
    """Part a's runs for one way of asserting (``how``, one of :data:`HOW`)."""

    how: str
    runs: list[_Run]

    @property
    def beside(self) -> bool:
        """Whether the assertions came from a timer thread beside each writer."""
        return self.how == "beside"

    @property
    def between(self) -> bool:
        """Whether the assertions came from the writer's thread, between appends."""
        return self.how == "between"

    @property
    def riding(self) -> bool:
        """Whether the assertions rode on the writer's next append."""
        return self.how == "riding"

    @property
    def plain(self) -> float:
        """The median events/s of the runs without assertions."""
        return statistics.median(r.rate for r in self.runs if not r.asserting)

    @property
    def asserting(self) -> float:
        """The median events/s of the asserting runs."""
        return statistics.median(r.rate for r in self.runs if r.asserting)

    @property
    def target(self) -> Target:
        """Asserting events/s over plain events/s (medians), held to :data:`TARGET_RATIO`."""
        return Target(self.asserting / self.plain, ">=", TARGET_RATIO)


@dataclass(frozen=True)
class Journal:
    """Part b's figures: the journal's size sampled every 100 ms, and what was written."""

    seconds: float
    assertions: int
    appended: int
    samples: list[tuple[float, int]]
    final: int
    index: int

    @property
    def largest(self) -> int:
        """The largest journal seen, bytes."""
        return max(size for _, size in self.samples)


@dataclass(frozen=True)
class Latency(Percentiles):
    """Part c's figures: assertions made, watermark reads seen, latencies in ms."""

    acks: int
    marks: int
    values_ms: list[float]


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


def _throughput(args: argparse.Namespace) -> list[Asserting]:
    """Part a: plain and asserting runs alternating, for each way of asserting asked for."""
    found = []
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
        found.append(Asserting(how, runs))
    return found


def _journal(args: argparse.Namespace) -> Journal:
    """Part b: one writer asserting against a store in this process, its journal sampled."""
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
    return Journal(seconds, assertions, appended, samples, final, index)


@dataclass
class _Seen:
    marks: list[tuple[float, int]] = field(default_factory=list)


def _latency(args: argparse.Namespace) -> Latency:
    """Part c: from each assertion's acknowledgement to a reader's watermark read covering it."""
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
    result = Latency(len(acks), len(marks), latencies)
    print(
        f"  latency: {len(latencies)} assertions, p50 {result.p50:.1f} ms, p99 {result.p99:.1f} ms"
    )
    return result


def _numbers(tick: int) -> int:
    """The first event number of append ``tick`` (ticks alternate between two writers)."""
    return ((tick - 1) // 2) * 10


@dataclass(frozen=True)
class EventTimeFigures:
    """The figures of the parts run (None, or empty: not run), and the settings."""

    writers: int
    batch: int
    seconds: float
    repetitions: int
    assert_every_ms: int
    compact_after: int
    latency_seconds: float
    interval_ms: int
    throughput: list[Asserting]
    journal: Journal | None
    latency: Latency | None
    software: tuple[str, ...] = ()

    @property
    def per_assertion(self) -> float:
        """Journal bytes per assertion: its growth between samples (compactions left out)."""
        assert self.journal is not None
        samples = self.journal.samples
        growth = [b - a for (_, a), (_, b) in zip(samples, samples[1:], strict=False) if b > a]
        if not growth:
            return 0
        return statistics.median(growth) / (0.1 * 1000 / self.assert_every_ms)

    @property
    def per_hour(self) -> float:
        """Assertions in an hour of one writer asserting every ``assert_every_ms``."""
        return 3600 * 1000 / self.assert_every_ms

    @property
    def hour_mib(self) -> float:
        """MiB of journal an hour of assertions writes without compaction."""
        return self.per_hour * self.per_assertion / 2**20

    @property
    def targets(self) -> dict[str, Target]:
        """Each way of asserting's throughput ratio, and part c's p99."""
        targets = {f"{a.how}_ratio": a.target for a in self.throughput}
        if self.latency is not None:
            targets["latency_p99"] = Target(self.latency.p99, "<", TARGET_LATENCY_P99_MS, "ms")
        return targets


def measure(args: argparse.Namespace) -> EventTimeFigures:
    """The parts asked for, one after the other."""
    if args.writers < 1 or args.repetitions < 1:
        msg = "--writers and --repetitions must be >= 1"
        raise BenchFailure(msg)
    return EventTimeFigures(
        writers=args.writers,
        batch=args.batch,
        seconds=args.seconds,
        repetitions=args.repetitions,
        assert_every_ms=args.assert_every_ms,
        compact_after=args.compact_after,
        latency_seconds=args.latency_seconds,
        interval_ms=args.interval_ms,
        throughput=_throughput(args) if "throughput" in args.parts else [],
        journal=_journal(args) if "journal" in args.parts else None,
        latency=_latency(args) if "latency" in args.parts else None,
    )


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(prog="event_time_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--assert-every-ms", type=int, default=10)
    parser.add_argument("--how", nargs="+", choices=HOW, default=list(HOW))
    parser.add_argument("--journal-seconds", type=float, default=30.0)
    parser.add_argument("--compact-after", type=int, default=1_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--interval-ms", type=int, default=10)
    return parser
