"""Percentile watermarks: how far behind the clock each watermark runs, and what it makes late.

    python -m bench.run percentile                       # both histories, default sizes
    python -m bench.run percentile --ticks 60 --no-write # a smoke run

Two seeded histories are written, tick by tick on a synthetic clock
(``--tick-ms`` each), to a real store server (gRPC on loopback, in this
process, file storage), and read as they grow by one reader group per
percentile in ``--percentiles`` (the reader core's ``EventReader``, lag 0):

a. **straggler segment** (ingestion-time domain): ``--segments`` segments
   each take an append of ``--events`` events a tick, stamped with the
   clock (their event time is their ingestion time); during the first
   ``--backlog-ticks`` ticks nobody reads and one segment takes
   ``--burst`` times as many (a device uploading a backlog); then each
   reader reads at most ``--capacity`` events a tick, so the straggler's
   backlog drains slowly; after the last tick each reads the rest (the
   delays are of the ticks only), so the late fraction is over every event
   written, the whole run the percentile rule bounds.
b. **straggler writers** (event-time domain): ``--writers`` writers, each
   writing one event a tick (routed by its id) and asserting its event
   time: the clock less a delay of its own, drawn up to
   ``--delay-ms``; ``--stragglers`` of them are ``--straggler-delay-ms``
   behind. Readers read everything each tick.

For each percentile: the watermark's delay behind the clock at the end of
each tick once the first watermark came (p50 and p99), and the fraction of
events read that were late. Beside them, the anchor: Flink's bounded
out-of-orderness over the same events in the order the perfect (p = 1)
reader read them (watermark = the largest event time seen less the bound
less 1 ms), for each bound in ``--bounds-ms``.

Work is weighted by events (seed 001: a fraction p of the in-flight data
lies after W), so in history a, once the straggler's backlog is most of the
unread events, W sits inside that backlog and moves through it, not at the
other segments' pace. The rule carries what the run made late (see
:mod:`connector.groups.percentile`): W passes unread work only while the events
late and those below W stay within 1 - p of the events seen, so the late share
over the run stays within 1 - p (applied afresh at each sync without those
counts, it compounded to about 1 - p^m over a backlog read in m syncs). The
allowance is spent first on the oldest events, so while a backlog is still
unread the share of the events read so far runs above it. In history b
each writer is told once per segment (it asserts on all of them): a
straggler's entries in every segment count against the allowance of
n - ceil(p * n) entries below W (see :mod:`connector.groups.percentile`).
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench._support import BenchFailure, package_version, positive
from bench.figures import Percentiles, Target
from connector import EventWriter, JsonSerializer, StoreClient
from connector.clock import ManualClock
from connector.reader import (
    EventRead,
    EventReader,
    FieldTimestampAssigner,
    ReaderConfig,
    ReaderGroupManager,
    TimeDomain,
)
from connector.server import StoreServer
from connector.store import StoreConfig

__all__ = ["Outcome", "PercentileFigures", "Story", "measure", "options"]

SCOPE = "bench"
START_MS = 1_700_000_000_000
#: How long a reader waits for a watermark after the events it was given (real time).
DRAIN_WAIT_MS = 20


@dataclass(frozen=True)
class Outcome(Percentiles):
    """One watermark rule over one history: its delays behind the clock (ms) and what was late."""

    rule: str
    values_ms: tuple[float, ...]
    events: int
    late: int

    @property
    def late_fraction(self) -> float:
        """Late events over events read."""
        return self.late / self.events if self.events else float("nan")


@dataclass(frozen=True)
class Story:
    """A history's outcomes: one per percentile, then one per bound of the anchor."""

    name: str
    domain: str
    events: int
    outcomes: tuple[Outcome, ...]

    def of(self, rule: str) -> Outcome:
        """The outcome of ``rule`` (``p=1`` ...)."""
        return next(o for o in self.outcomes if o.rule == rule)


# --- the anchor ------------------------------------------------------------------------


class BoundedOutOfOrderness:
    """Flink's ``BoundedOutOfOrdernessWatermarks`` over a sequence of event times.

    The watermark is the largest event time seen less ``bound_ms`` less 1 ms;
    an event at or below the watermark before it is late.
    """

    def __init__(self, bound_ms: int):
        self.bound_ms = bound_ms
        self.largest: int | None = None
        self.events = 0
        self.late = 0

    @property
    def watermark(self) -> int | None:
        """The watermark now (None before the first event)."""
        return None if self.largest is None else self.largest - self.bound_ms - 1

    def on_event(self, event_time: int) -> None:
        """Takes an event: counts it late or not, then moves the watermark."""
        mark = self.watermark
        self.events += 1
        self.late += mark is not None and event_time <= mark
        self.largest = event_time if self.largest is None else max(self.largest, event_time)


# --- a reader group per percentile -----------------------------------------------------


class Follower:
    """One reader at one percentile: reads each tick, keeps its delays and late count."""

    def __init__(self, reader: EventReader, on_event: Callable[[int], None] | None = None):
        self.reader = reader
        self.on_event = on_event
        self.watermark: int | None = None
        self.events = 0
        self.late = 0
        self.delays: list[float] = []

    def read(self, available: int, capacity: int | None) -> None:
        """Reads up to ``capacity`` of the ``available`` unread events; once all, the watermarks."""
        want = available if capacity is None else min(available, capacity)
        read = 0
        while read < want:
            got = self.reader.read_next_event(10_000)
            if got is None:
                msg = f"no read within 10 s after {self.events:,} events ({want - read} due)"
                raise BenchFailure(msg)
            read += self._take(got)
        if want < available:
            return  # the rest waits for the next tick
        while (got := self.reader.read_next_event(DRAIN_WAIT_MS)) is not None:
            read += self._take(got)  # watermarks after the last event (or a new event)

    def _take(self, got: EventRead) -> int:
        mark = got.watermark
        if mark is not None:
            if self.watermark is not None and mark <= self.watermark:
                msg = f"watermark {mark} after {self.watermark}: not ascending"
                raise BenchFailure(msg)
            self.watermark = mark
            return 0
        self.events += 1
        self.late += got.late
        if self.on_event is not None and got.event_time is not None:
            self.on_event(got.event_time)
        return 1

    def note_delay(self, now: int) -> None:
        """The delay behind the clock now, once there is a watermark."""
        if self.watermark is not None:
            self.delays.append(float(now - self.watermark))


# --- the histories ---------------------------------------------------------------------


class _Run:
    """A server on a synthetic clock, a stream, and a follower per percentile plus anchors."""

    def __init__(self, client: StoreClient, clock: ManualClock, args: argparse.Namespace):
        self.client = client
        self.clock = clock
        self.args = args

    def followers(
        self, stream: str, domain: TimeDomain, anchors: Sequence[BoundedOutOfOrderness]
    ) -> dict[float, Follower]:
        manager = ReaderGroupManager(self.client)
        followers = {}
        for p in self.args.percentiles:
            name = f"{stream.split('/')[1]}-p{p}".replace(".", "_")
            group = manager.create_reader_group(SCOPE, name, [stream])
            config = ReaderConfig(
                time_domain=domain,
                timestamp_assigner=FieldTimestampAssigner("t"),
                watermark_percentile=p,
            )
            reader = group.create_reader("reader", JsonSerializer(), config)

            def feed(t: int) -> None:
                for anchor in anchors:
                    anchor.on_event(t)

            followers[p] = Follower(reader, feed if p == 1 else None)
        return followers


def _outcomes(
    followers: dict[float, Follower],
    anchors: Sequence[BoundedOutOfOrderness],
    delays: dict[int, list[float]],
) -> tuple[Outcome, ...]:
    outcomes = [
        Outcome(f"p={p:g}", tuple(f.delays), f.events, f.late) for p, f in followers.items()
    ]
    outcomes += [
        Outcome(f"bounded {a.bound_ms / 1000:g} s", tuple(delays[a.bound_ms]), a.events, a.late)
        for a in anchors
    ]
    for follower in followers.values():
        follower.reader.close()
    return tuple(outcomes)


def _tick_end(
    run: _Run,
    followers: dict[float, Follower],
    anchors: Sequence[BoundedOutOfOrderness],
    delays: dict[int, list[float]],
) -> None:
    now = run.clock.now_ms()
    for follower in followers.values():
        follower.note_delay(now)
    for anchor in anchors:
        if anchor.watermark is not None:
            delays[anchor.bound_ms].append(float(now - anchor.watermark))


def straggler_segment(run: _Run) -> Story:
    """History a: one segment's backlog, read at a bounded rate, in the ingestion-time domain."""
    args, client, clock = run.args, run.client, run.clock
    client.create_stream(SCOPE, "segments", segment_count=args.segments)
    segments = [s.segment for s in client.describe_stream(SCOPE, "segments").segments]
    anchors = [BoundedOutOfOrderness(b) for b in args.bounds_ms]
    followers = run.followers(f"{SCOPE}/segments", TimeDomain.INGESTION_TIME, anchors)
    delays: dict[int, list[float]] = {b: [] for b in args.bounds_ms}
    numbers = dict.fromkeys(segments, 0)
    written = 0
    print(f"  a. straggler segment: {args.ticks} ticks ...", flush=True)
    for tick in range(args.ticks):
        clock.advance(args.tick_ms)
        for n, segment in enumerate(segments):
            count = args.events * (args.burst if n == 0 and tick < args.backlog_ticks else 1)
            event = JsonSerializer().serialize({"t": clock.now_ms()})
            client.append(segment, f"w{n}", numbers[segment], [event] * count)
            numbers[segment] += count
            written += count
        if tick < args.backlog_ticks:
            continue
        for follower in followers.values():
            follower.read(written - follower.events, args.capacity)
        _tick_end(run, followers, anchors, delays)
    for follower in followers.values():  # the rest, nothing more written: every event counts
        follower.read(written - follower.events, None)
    outcomes = _outcomes(followers, anchors, delays)
    return Story("straggler segment", "ingestion time", written, outcomes)


def straggler_writers(run: _Run) -> Story:
    """History b: writers asserting their event time, a few far behind, in the event-time domain."""
    args, client, clock = run.args, run.client, run.clock
    client.create_stream(SCOPE, "writers", segment_count=args.segments)
    rng = random.Random(args.seed)
    delays_of = [
        args.straggler_delay_ms if i < args.stragglers else rng.randrange(args.delay_ms + 1)
        for i in range(args.writers)
    ]
    writers = [
        EventWriter(client, f"{SCOPE}/writers", JsonSerializer(), writer_id=f"w{i}")
        for i in range(args.writers)
    ]
    anchors = [BoundedOutOfOrderness(b) for b in args.bounds_ms]
    followers = run.followers(f"{SCOPE}/writers", TimeDomain.EVENT_TIME, anchors)
    delays: dict[int, list[float]] = {b: [] for b in args.bounds_ms}
    written = 0
    print(f"  b. straggler writers: {args.ticks} ticks ...", flush=True)
    for _ in range(args.ticks):
        clock.advance(args.tick_ms)
        for i, writer in enumerate(writers):
            t = clock.now_ms() - delays_of[i]
            writer.write_event({"t": t}, routing_key=f"w{i}")
            writer.note_time(t)
            writer.flush()
            written += 1
        for follower in followers.values():
            follower.read(written - follower.events, None)
        _tick_end(run, followers, anchors, delays)
    for writer in writers:
        writer.close()
    outcomes = _outcomes(followers, anchors, delays)
    return Story("straggler writers", "event time", written, outcomes)


# --- figures ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PercentileFigures:
    """The settings and both histories' stories (None: the part was not run)."""

    seed: int
    ticks: int
    tick_ms: int
    segments: int
    events: int
    burst: int
    backlog_ticks: int
    capacity: int
    writers: int
    stragglers: int
    delay_ms: int
    straggler_delay_ms: int
    percentiles: tuple[float, ...]
    bounds_ms: tuple[int, ...]
    segment: Story | None
    writer: Story | None
    software: tuple[str, ...]

    @property
    def targets(self) -> dict[str, Target]:
        """The perfect watermark makes nothing late, in each history run."""
        return {
            story.name: Target(story.of("p=1").late_fraction, "<=", 0.0)
            for story in (self.segment, self.writer)
            if story is not None and 1.0 in self.percentiles
        }


def _fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(0 < v <= 1 for v in values):
        msg = f"{text!r}: comma-separated percentiles in (0, 1]"
        raise argparse.ArgumentTypeError(msg)
    return values


def _bounds(text: str) -> tuple[int, ...]:
    return tuple(positive(v) for v in text.split(","))


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(
        prog="percentile_bench", description="Percentile watermarks' delay and late fraction."
    )
    add = parser.add_argument
    add("--parts", default="segment,writers", help="segment, writers or both (default both)")
    add("--seed", type=int, default=1, help="the histories' seed (1)")
    add("--ticks", type=positive, default=600, help="ticks of each history (600)")
    add("--tick-ms", type=positive, default=100, help="synthetic ms a tick (100)")
    add("--segments", type=positive, default=8, help="segments of each stream (8)")
    add("--events", type=positive, default=5, help="a: events a segment takes a tick (5)")
    add("--burst", type=positive, default=20, help="a: the straggler's backlog rate, x (20)")
    add("--backlog-ticks", type=positive, default=100, help="a: ticks before reading (100)")
    add("--capacity", type=positive, default=60, help="a: events a reader reads a tick (60)")
    add("--writers", type=positive, default=40, help="b: writers (40)")
    add("--stragglers", type=int, default=2, help="b: writers far behind (2)")
    add("--delay-ms", type=int, default=500, help="b: the others' delays, up to (500)")
    add("--straggler-delay-ms", type=positive, default=30_000, help="b: stragglers' (30000)")
    add("--percentiles", type=_fractions, default=(1.0, 0.99, 0.9, 0.5), help="1,0.99,0.9,0.5")
    add("--bounds-ms", type=_bounds, default=(1_000, 5_000, 30_000), help="1000,5000,30000")
    return parser


def measure(args: argparse.Namespace) -> PercentileFigures:
    """Runs the parts asked for, each on a fresh server; returns the figures."""
    parts = {p.strip() for p in args.parts.split(",")}
    if not parts <= {"segment", "writers"}:
        msg = f"--parts {args.parts!r}: segment, writers or both"
        raise BenchFailure(msg)
    stories: dict[str, Story | None] = {"segment": None, "writers": None}
    for part, story in (("segment", straggler_segment), ("writers", straggler_writers)):
        if part not in parts:
            continue
        clock = ManualClock(START_MS)
        with tempfile.TemporaryDirectory() as folder:
            config = StoreConfig(data_dir=folder, clock=clock, polling_period_ms=None)
            server = StoreServer(config, listen="127.0.0.1:0").start()
            try:
                with StoreClient(server.uri, call_timeout_s=60) as client:
                    client.create_scope(SCOPE)
                    stories[part] = story(_Run(client, clock, args))
            finally:
                server.stop(grace_s=0.5)
        for outcome in stories[part].outcomes:  # type: ignore[union-attr]
            print(
                f"    {outcome.rule}: delay p50 {outcome.p50:,.0f} ms, p99 {outcome.p99:,.0f} ms; "
                f"late {outcome.late_fraction:.2%} of {outcome.events:,}",
                flush=True,
            )
    return PercentileFigures(
        seed=args.seed,
        ticks=args.ticks,
        tick_ms=args.tick_ms,
        segments=args.segments,
        events=args.events,
        burst=args.burst,
        backlog_ticks=args.backlog_ticks,
        capacity=args.capacity,
        writers=args.writers,
        stragglers=args.stragglers,
        delay_ms=args.delay_ms,
        straggler_delay_ms=args.straggler_delay_ms,
        percentiles=tuple(args.percentiles),
        bounds_ms=tuple(args.bounds_ms),
        segment=stories["segment"],
        writer=stories["writers"],
        software=(f"grpcio {package_version('grpcio')}",),
    )
