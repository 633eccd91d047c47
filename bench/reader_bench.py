"""Reader benchmark: the watermark overhead of one reader, and watermark latency.

    python -m bench.run reader                      # all three parts, default settings
    python -m bench.run reader --events 100000      # a smaller throughput part
    python -m bench.run reader --parts idle         # one part only

Every part runs against a real server subprocess (``python -m
connector.server`` on loopback, fsync on every commit); the reader, and the
writer where there is one, run in this process, each in its own thread.

a. **throughput**: ``--events`` events of ``--event-size`` bytes (no routing
   key, so spread over both segments of a 2-segment stream) are written once
   with :class:`EventWriter`; then one reader
   (``ReaderGroupManager(...).create_reader_group(...).create_reader(...)``,
   ``read_next_event``) reads them all, in a fresh reader group each time,
   alternating the processing-time domain (the default, no watermarks) and the
   ingestion-time domain, ``--repetitions`` times each. The figure is events/s
   from the first ``read_next_event`` to the last event; the ratio of the
   medians is the watermark overhead. A last, untimed ingestion-time read runs
   under cProfile to show where the time goes.
b. **steady**: a writer appends ``--batch`` events every ``--interval-ms`` (half
   to each segment, one ``StoreClient.append`` per segment, on a fixed
   schedule) for ``--steady-seconds``; one reader in the ingestion-time domain
   (``max_event_time_lag`` 0) records the wall time of every watermark read.
   For each append, latency = wall time of the first watermark read ``W >=``
   the append's ingestion time, minus the wall time the append was
   acknowledged (``StoreClient.append`` returned).
c. **idle**: a server with ``--idle-lag-ms L`` and ``--idle-polling-ms P``; one
   event is written, then nothing. For instants ``T`` sampled every 10 ms from
   that append's acknowledgement on, latency = wall time of the first
   watermark read ``W >= T`` (``T`` in epoch ms) minus ``T``. Server and
   benchmark share the machine's clock.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import cProfile
import os
import pstats
import random
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc

from bench._support import (
    BenchFailure,
    StoreServerProcess,
    TimedEvents,
    percentile,
    positive,
    timed,
)
from bench.figures import Percentiles, Target
from connector import BytesSerializer, EventWriter, StoreClient
from connector.reader import EventReader, ReaderConfig, ReaderGroupManager, TimeDomain

__all__ = ["Latencies", "ReaderFigures", "Throughput", "measure", "options"]

TARGET_OVERHEAD = 0.10  # ingestion-time events/s within 10% of processing-time
TARGET_STEADY_P99_MS = 250.0
IDLE_MARGIN_MS = 250.0  # idle target: L + P + this
SCOPE = "bench"
PARTS = ("throughput", "steady", "idle")


# --- a. throughput -----------------------------------------------------------------


@dataclass
class ReadRun(TimedEvents):
    """One timed read of every event, in one time domain."""

    domain: TimeDomain
    watermarks: int


@dataclass
class Throughput:
    """Part a's reads, and where the profiled ingestion-time read spent its time."""

    runs: list[ReadRun]
    profile_share: float  # share of the profiled ingestion-time read spent computing watermarks
    profile_top: list[tuple[str, float]]  # (function, own seconds), top few

    def of(self, domain: TimeDomain) -> list[ReadRun]:
        """The reads in ``domain``."""
        return [r for r in self.runs if r.domain is domain]

    def median(self, domain: TimeDomain) -> float:
        """The median events/s of the reads in ``domain``."""
        return statistics.median(r.events_per_s for r in self.of(domain))

    @property
    def processing(self) -> float:
        """The median events/s in the processing-time domain."""
        return self.median(TimeDomain.PROCESSING_TIME)

    @property
    def ingestion(self) -> float:
        """The median events/s in the ingestion-time domain."""
        return self.median(TimeDomain.INGESTION_TIME)

    @property
    def ratio(self) -> float:
        """Ingestion-time events/s over processing-time events/s (medians)."""
        return self.ingestion / self.processing

    @property
    def overhead(self) -> float:
        """What watermarks cost: 1 - :attr:`ratio`."""
        return 1 - self.ratio

    @property
    def top(self) -> list[tuple[str, float]]:
        """The three functions with the most own time in the profiled read, and their seconds."""
        return self.profile_top[:3]


def _read_all(reader: EventReader[bytes], events: int) -> tuple[int, int]:
    """Reads until ``events`` events came; returns (events, watermark reads)."""
    count = 0
    watermarks = 0
    last = None
    while count < events:
        read = reader.read_next_event(10_000)
        if read is None:
            msg = f"reader got no read within 10 s after {count:,} of {events:,} events"
            raise BenchFailure(msg)
        if read.watermark is None:
            count += 1
        else:
            if last is not None and read.watermark <= last:
                msg = f"watermark {read.watermark} after {last}: not ascending"
                raise BenchFailure(msg)
            last = read.watermark
            watermarks += 1
    return count, watermarks


def run_throughput(args: argparse.Namespace) -> Throughput:
    runs: list[ReadRun] = []
    with StoreServerProcess() as server, StoreClient(server.uri, call_timeout_s=120) as client:
        client.create_scope(SCOPE)
        client.create_stream(SCOPE, "events", segment_count=2)
        blob = random.Random(args.seed).randbytes(args.events * args.event_size)
        size = args.event_size
        print(f"  writing {args.events:,} events ...", flush=True)
        with EventWriter(client, f"{SCOPE}/events", BytesSerializer()) as writer:
            for i in range(0, len(blob), size):
                writer.write_event(blob[i : i + size])
        manager = ReaderGroupManager(client)
        domains = [TimeDomain.PROCESSING_TIME, TimeDomain.INGESTION_TIME]
        for repetition in range(args.repetitions):
            for domain in domains if repetition % 2 == 0 else domains[::-1]:
                group = manager.create_reader_group(
                    SCOPE, f"tp-{repetition}-{domain.value}", [f"{SCOPE}/events"]
                )
                reader = group.create_reader(
                    "reader", BytesSerializer(), ReaderConfig(time_domain=domain)
                )
                try:
                    with timed(server.pid) as timing:
                        count, watermarks = _read_all(reader, args.events)
                finally:
                    reader.close()
                run = ReadRun(count, timing, domain, watermarks)
                runs.append(run)
                print(
                    f"  {domain.value}: {run.events_per_s:,.0f} events/s "
                    f"({watermarks} watermark reads, {run.seconds:.2f} s)",
                    flush=True,
                )
        share, top = _profile_ingestion(manager, args.events)
    return Throughput(runs, share, top)


def _profile_ingestion(
    manager: ReaderGroupManager, events: int
) -> tuple[float, list[tuple[str, float]]]:
    """One untimed ingestion-time read under cProfile: the watermark share and the top functions."""
    group = manager.create_reader_group(SCOPE, "tp-profile", [f"{SCOPE}/events"])
    reader = group.create_reader(
        "reader", BytesSerializer(), ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)
    )
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        _read_all(reader, events)
        profiler.disable()
    finally:
        reader.close()
    stats = pstats.Stats(profiler)
    raw = stats.stats  # type: ignore[attr-defined]
    total = 0.0
    watermark = 0.0
    own: list[tuple[str, float]] = []
    for (path, _line, name), (_cc, _nc, tottime, cumtime, _callers) in raw.items():
        if name == "read_next_event" and path.endswith(os.path.join("reader", "reader.py")):
            total = max(total, cumtime)
        if name == "_watermark_to_emit":
            watermark = cumtime
        label = f"{os.path.basename(path)}:{name}" if path != "~" else name
        own.append((label, tottime))
    own.sort(key=lambda item: -item[1])
    return (watermark / total if total else float("nan")), own[:5]


# --- watermark reads in a thread ------------------------------------------------------


@dataclass
class WatermarkLog:
    """What a reader thread saw: (wall time, watermark) of every watermark read, events read."""

    times: list[float] = field(default_factory=list)
    watermarks: list[int] = field(default_factory=list)
    events: int = 0
    error: BaseException | None = None
    reads: int = 0

    def first_covering(self, instant_ms: float) -> float | None:
        """Wall time of the first watermark read >= ``instant_ms``, or None."""
        index = bisect.bisect_left(self.watermarks, instant_ms)
        return self.times[index] if index < len(self.times) else None


class ReaderThread(threading.Thread):
    """Reads in the ingestion-time domain (lag 0) until stopped, logging watermark reads."""

    def __init__(self, client: StoreClient, group_name: str, stream: str):
        super().__init__(name=f"bench-reader-{group_name}", daemon=True)
        group = ReaderGroupManager(client).create_reader_group(SCOPE, group_name, [stream])
        config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME, max_event_time_lag=0)
        self.reader = group.create_reader("reader", BytesSerializer(), config)
        self.log = WatermarkLog()
        self.stopping = threading.Event()
        self.started_reading = threading.Event()

    def run(self) -> None:
        log = self.log
        try:
            while not self.stopping.is_set():
                read = self.reader.read_next_event(100)
                now = time.time()
                log.reads += 1
                self.started_reading.set()
                if read is None:
                    continue
                if read.watermark is None:
                    log.events += 1
                else:
                    log.times.append(now)
                    log.watermarks.append(read.watermark)
        except BaseException as error:  # reported by stop()
            log.error = error
        finally:
            self.started_reading.set()
            self.reader.close()

    def stop(self) -> WatermarkLog:
        self.stopping.set()
        self.join(30)
        if self.is_alive():
            msg = "the reader thread did not stop within 30 s"
            raise BenchFailure(msg)
        if self.log.error is not None:
            msg = f"the reader thread failed: {self.log.error!r}"
            raise BenchFailure(msg)
        return self.log


def _stream_segments(client: StoreClient, stream: str) -> list[str]:
    return [s.segment for s in client.describe_stream(SCOPE, stream).open_segments]


@contextlib.contextmanager
def _watched_stream(
    stream: str, *server_args: str
) -> Iterator[tuple[StoreClient, list[str], ReaderThread]]:
    """A server, a 2-segment stream, a writer client, its segments and a reading ReaderThread.

    The thread is stopped (and its failure raised) on the way out; then its
    log is ``thread.log``.
    """
    with (
        StoreServerProcess(*server_args) as server,
        StoreClient(server.uri) as writer_client,
        StoreClient(server.uri) as reader_client,
    ):
        writer_client.create_scope(SCOPE)
        writer_client.create_stream(SCOPE, stream, segment_count=2)
        segments = _stream_segments(writer_client, stream)
        thread = ReaderThread(reader_client, stream, f"{SCOPE}/{stream}")
        thread.start()
        try:
            thread.started_reading.wait(10)
            yield writer_client, segments, thread
        finally:
            thread.stop()


# --- b. steady writes ------------------------------------------------------------------


@dataclass
class Latencies(Percentiles):
    """Watermark latencies of part b or c, ms, and the part's own figures in ``extra``."""

    values_ms: list[float]
    excluded: int  # samples no watermark read covered before the end
    extra: dict[str, float] = field(default_factory=dict)


def run_steady(args: argparse.Namespace) -> Latencies:
    with _watched_stream("steady") as (writer_client, segments, thread):
        time.sleep(0.5)  # the reader is at the tails, its reads waiting
        payload = b"x" * args.event_size
        per_segment = [
            args.batch // len(segments) + (i < args.batch % len(segments))
            for i in range(len(segments))
        ]
        numbers = [0] * len(segments)
        appends: list[tuple[int, float]] = []  # (ingestion time, wall time of the ack)
        interval = args.interval_ms / 1000
        ticks = int(args.steady_seconds / interval)
        late_ticks = 0
        start = time.monotonic()
        print(
            f"  appending {args.batch} events every {args.interval_ms} ms for "
            f"{args.steady_seconds:.0f} s ...",
            flush=True,
        )
        for tick in range(ticks):
            due = start + tick * interval
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            elif pause < -interval:
                late_ticks += 1
            for n, segment in enumerate(segments):
                count = per_segment[n]
                if not count:
                    continue
                result = writer_client.append(segment, f"steady-{n}", numbers[n], [payload] * count)
                appends.append((result.ingestion_time, time.time()))
                numbers[n] += count
        elapsed = time.monotonic() - start
        time.sleep(1.0)  # let the reader catch up with what is covered already
    log = thread.log
    values = []
    excluded = 0
    # The append that raised a watermark read to W is the one ingested at W + 1.
    ack_of_time: dict[int, float] = {}
    for ingestion_time, acked in appends:
        ack_of_time[ingestion_time] = max(acked, ack_of_time.get(ingestion_time, acked))
    delivery = [
        (seen - ack_of_time[w + 1]) * 1000
        for seen, w in zip(log.times, log.watermarks, strict=True)
        if w + 1 in ack_of_time
    ]
    for ingestion_time, acked in appends:
        seen = log.first_covering(ingestion_time)
        if seen is None:
            excluded += 1
        else:
            values.append((seen - acked) * 1000)
    written = sum(numbers)
    if log.events != written:
        msg = f"steady: the reader returned {log.events} events, {written} were written"
        raise BenchFailure(msg)
    extra = {
        "appends": len(appends),
        "events": written,
        "rate": written / elapsed,
        "late_ticks": late_ticks,
        "watermark_reads": len(log.watermarks),
        "min": min(values) if values else float("nan"),
        "delivery_n": len(delivery),
        "delivery_p50": percentile(delivery, 50),
        "delivery_p99": percentile(delivery, 99),
    }
    return Latencies(values, excluded, extra)


# --- c. idle stream ----------------------------------------------------------------------


def run_idle(args: argparse.Namespace) -> Latencies:
    lag, period = args.idle_lag_ms, args.idle_polling_ms
    server_args = ("--max-watermark-lag-ms", str(lag), "--polling-period-ms", str(period))
    with _watched_stream("idle", *server_args) as (writer_client, segments, thread):
        writer_client.append(segments[0], "idle-writer", 0, [b"x" * args.event_size])
        acked = time.time()
        print(f"  one event written; idle for {args.idle_seconds:.0f} s ...", flush=True)
        time.sleep(args.idle_seconds)
    log = thread.log
    if log.events != 1:
        msg = f"idle: the reader returned {log.events} events, 1 was written"
        raise BenchFailure(msg)
    if not log.watermarks:
        msg = "idle: the reader returned no watermark"
        raise BenchFailure(msg)
    step = 0.010
    samples = []
    excluded = 0
    instant = acked
    last_covered = log.watermarks[-1] / 1000
    while instant <= acked + args.idle_seconds:
        seen = log.first_covering(instant * 1000)
        if seen is None or instant > last_covered:
            excluded += 1
        else:
            samples.append((seen - instant) * 1000)
        instant += step
    idle_reads = [t for t in log.times if t > acked]
    gaps = [b - a for a, b in zip(idle_reads, idle_reads[1:], strict=False)]
    extra = {
        "watermark_reads": len(idle_reads),
        "mean_gap_ms": statistics.mean(gaps) * 1000 if gaps else float("nan"),
        "max_gap_ms": max(gaps) * 1000 if gaps else float("nan"),
        "max": max(samples) if samples else float("nan"),
    }
    return Latencies(samples, excluded, extra)


# --- figures ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReaderFigures:
    """The figures of the parts run (None: not run), and the settings they ran with."""

    events: int
    event_size: int
    repetitions: int
    batch: int
    interval_ms: int
    steady_seconds: float
    idle_lag_ms: int
    idle_polling_ms: int
    idle_seconds: float
    throughput: Throughput | None
    steady: Latencies | None
    idle: Latencies | None
    software: tuple[str, ...]
    max_overhead: float = TARGET_OVERHEAD
    idle_margin_ms: float = IDLE_MARGIN_MS

    @property
    def idle_bound_ms(self) -> float:
        """The idle part's target: L + P + the margin, ms."""
        return self.idle_lag_ms + self.idle_polling_ms + self.idle_margin_ms

    @property
    def targets(self) -> dict[str, Target]:
        """Those of the parts run: a. the ratio, b. p99 under steady writes, c. the idle max."""
        targets = {}
        if self.throughput is not None:
            targets["throughput"] = Target(self.throughput.ratio, ">=", 1 - TARGET_OVERHEAD)
        if self.steady is not None:
            targets["steady"] = Target(self.steady.p99, "<", TARGET_STEADY_P99_MS, "ms")
        if self.idle is not None:
            targets["idle"] = Target(self.idle.extra["max"], "<=", self.idle_bound_ms, "ms")
        return targets


# --- entry point ---------------------------------------------------------------------------


def _parts(text: str) -> list[str]:
    """``--parts``: comma-separated names of :data:`PARTS`."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        msg = f"unknown parts {unknown!r}; choose from {', '.join(PARTS)}"
        raise argparse.ArgumentTypeError(msg)
    return parts


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(
        prog="reader_bench",
        description="Reader throughput with and without watermarks; watermark latency.",
    )
    parser.add_argument(
        "--parts",
        type=_parts,
        default=list(PARTS),
        help=f"comma-separated parts to run (default {','.join(PARTS)})",
    )
    parser.add_argument("--events", type=positive, default=300_000, help="a: events (300000)")
    parser.add_argument("--event-size", type=positive, default=100, help="payload bytes (100)")
    parser.add_argument(
        "--repetitions", type=positive, default=3, help="a: timed reads per time domain (3)"
    )
    parser.add_argument("--batch", type=positive, default=10, help="b: events per batch (10)")
    parser.add_argument(
        "--interval-ms", type=int, default=10, help="b: ms between batches (default 10)"
    )
    parser.add_argument(
        "--steady-seconds", type=float, default=10.0, help="b: seconds of writing (default 10)"
    )
    parser.add_argument(
        "--idle-lag-ms",
        type=int,
        default=1000,
        help="c: the server's --max-watermark-lag-ms (default 1000)",
    )
    parser.add_argument(
        "--idle-polling-ms",
        type=int,
        default=200,
        help="c: the server's --polling-period-ms (default 200)",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=15.0, help="c: seconds idle (default 15)"
    )
    parser.add_argument("--seed", type=int, default=2024, help="payload generator seed")
    return parser


def measure(args: argparse.Namespace) -> ReaderFigures:
    """The parts asked for, one after the other."""
    throughput = steady = idle = None
    if "throughput" in args.parts:
        print("a. throughput, processing time vs ingestion time", flush=True)
        throughput = run_throughput(args)
    if "steady" in args.parts:
        print("b. watermark latency under steady writes", flush=True)
        steady = run_steady(args)
    if "idle" in args.parts:
        print("c. watermark latency on an idle stream", flush=True)
        idle = run_idle(args)
    return ReaderFigures(
        events=args.events,
        event_size=args.event_size,
        repetitions=args.repetitions,
        batch=args.batch,
        interval_ms=args.interval_ms,
        steady_seconds=args.steady_seconds,
        idle_lag_ms=args.idle_lag_ms,
        idle_polling_ms=args.idle_polling_ms,
        idle_seconds=args.idle_seconds,
        throughput=throughput,
        steady=steady,
        idle=idle,
        software=(f"grpcio {grpc.__version__}",),
    )
