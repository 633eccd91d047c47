"""What the scale benchmarks share: the grid of idle segments, the store under test, CPU windows.

Not a benchmark itself (the benchmarks are listed in :mod:`bench.registry`).
A *setup* is a storage (the file store, or JetStream on a local 3-node
cluster) holding N idle segments laid out as one stream of N or N/16
streams of 16. Each part of a benchmark starts its consumer on a fresh
store of one setup, waits for its steady state, and measures the CPU of
every process involved over a window (:class:`CpuWindow`), under a *load*:
``idle`` (nothing written) or ``writes`` (1 % of the segments, at least one,
take 100 events a second each: an append of 10 events every 100 ms,
:class:`Ticker`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from bench._support import (
    BenchFailure,
    StoreServerProcess,
    children,
    cpu_seconds,
    descendants,
    free_port,
)
from connector import StoreClient
from connector.devtools.local_cluster import LocalCluster
from connector.errors import TidemarkError

__all__ = [
    "LAYOUTS",
    "LOADS",
    "SIZES",
    "STORAGES",
    "Cell",
    "GridFigures",
    "CpuWindow",
    "NotRun",
    "Setup",
    "Skipped",
    "Store",
    "Ticker",
    "add_grid_options",
    "cluster_nodes",
    "each_setup",
    "java_processes",
    "local_cluster",
    "request_counts",
    "setups",
    "store_under_test",
    "writes_to_store",
]

SIZES = (16, 256, 1_024, 4_096, 16_384)
STORAGES = ("file", "jetstream")
#: ``one``: one stream of N segments; ``many``: N/16 streams of 16.
LAYOUTS = ("one", "many")
LOADS = ("idle", "writes")
#: The segments of each stream in the ``many`` layout.
STREAM_WIDTH = 16
#: The share of the segments written to under the ``writes`` load, and each one's rate.
WRITE_SHARE = 0.01
WRITE_EVENTS_PER_S = 100
WRITE_EVERY_S = 0.1
#: Where the issue's targets are judged: N = 4,096 on the file store.
TARGET_SEGMENTS = 4_096
SCOPE = "scale"


def _list_of(kind: type, choices: Sequence[object] | None = None) -> Callable[[str], list]:
    """An argparse ``type``: a comma-separated list of ``kind`` (``4,096`` is not split)."""

    def parse(text: str) -> list:
        try:
            items = [kind(part.strip()) for part in text.split(",") if part.strip()]
        except ValueError:
            items = []
        bad = [item for item in items if choices is not None and item not in choices]
        if bad or not items:
            allowed = f"; choose from {', '.join(map(str, choices))}" if choices else ""
            msg = f"{text!r} is not a comma-separated list of {kind.__name__}{allowed}"
            raise argparse.ArgumentTypeError(msg)
        return items

    return parse


def add_grid_options(parser: argparse.ArgumentParser) -> None:
    """The options both scale benchmarks take: the grid and the durations."""
    parser.add_argument(
        "--sizes", type=_list_of(int), default=list(SIZES), help="segments N (16,256,...,16384)"
    )
    parser.add_argument(
        "--storages", type=_list_of(str, STORAGES), default=list(STORAGES), help="file,jetstream"
    )
    parser.add_argument(
        "--layouts", type=_list_of(str, LAYOUTS), default=list(LAYOUTS),
        help="one: one stream of N; many: N/16 streams of 16 (default both)",
    )  # fmt: skip
    parser.add_argument(
        "--loads", type=_list_of(str, LOADS), default=list(LOADS),
        help="idle, and writes on 1%% of the segments at 100 events/s each (default both)",
    )  # fmt: skip
    parser.add_argument(
        "--settle", type=float, default=5.0, help="s after a consumer is ready before measuring (5)"
    )
    parser.add_argument("--window", type=float, default=20.0, help="s of each CPU window (20)")
    parser.add_argument(
        "--start-timeout", type=float, default=180.0,
        help="s a consumer may take to start, or a store to create its streams (180)",
    )  # fmt: skip


@dataclass(frozen=True)
class Setup:
    """A storage holding ``segments`` idle segments in ``layout`` (:data:`LAYOUTS`)."""

    storage: str
    layout: str
    segments: int

    @property
    def width(self) -> int:
        """Segments per stream."""
        return self.segments if self.layout == "one" else min(STREAM_WIDTH, self.segments)

    @property
    def streams(self) -> list[str]:
        """The streams' names, ``scope/name``."""
        return [f"{SCOPE}/s{n}" for n in range(math.ceil(self.segments / self.width))]

    @property
    def shape(self) -> str:
        """``1 × 4,096`` or ``256 × 16``: streams × segments each."""
        return f"{len(self.streams):,} × {self.width:,}"

    @property
    def label(self) -> str:
        """``file, 1 × 4,096``."""
        return f"{self.storage}, {self.shape}"

    @property
    def written(self) -> int:
        """Segments written to under the ``writes`` load: 1 %, at least one."""
        return max(1, round(self.segments * WRITE_SHARE))


def setups(args: argparse.Namespace) -> list[Setup]:
    """The grid asked for, by storage then size then layout; N <= 16 has one layout only."""
    found = []
    for storage in args.storages:
        for size in args.sizes:
            for layout in args.layouts:
                setup = Setup(storage, layout, size)
                if layout == "many" and size <= STREAM_WIDTH and "one" in args.layouts:
                    continue  # one stream of 16 either way
                found.append(setup)
    return found


class NotRun(Exception):
    """A setup the store refused or could not make in time: the reason, as a sentence."""


@dataclass(frozen=True)
class Skipped:
    """A setup not run: its label and why (a limit the store named, or a timeout)."""

    label: str
    reason: str


@dataclass
class Store:
    """A store server holding a setup's segments: where it answers, and its processes."""

    setup: Setup
    uri: str
    server_pid: int
    nats_pids: list[int]
    segments: list[str]
    metrics_url: str
    create_seconds: float

    def pids(self) -> dict[str, list[int]]:
        """The store's processes by role: ``server``, and ``nats`` (3 nodes) on JetStream."""
        return {"server": [self.server_pid], **({"nats": self.nats_pids} if self.nats_pids else {})}

    def written_segments(self) -> list[str]:
        """The segments the ``writes`` load appends to, spread evenly over them all."""
        step = len(self.segments) / self.setup.written
        return [self.segments[int(i * step)] for i in range(self.setup.written)]


def _children_named(name: str) -> list[int]:
    """The processes this process started whose command is ``name``."""
    found = []
    for pid in children(os.getpid()):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/comm", encoding="ascii") as comm:
            if comm.read().strip() == name:
                found.append(pid)
    return found


def cluster_nodes() -> list[int]:
    """The nats-server processes this process started (a :class:`LocalCluster`'s nodes)."""
    return _children_named("nats-server")


def java_processes() -> list[int]:
    """The JVMs this process started (Spark's, Flink's mini-cluster) and their Python workers."""
    return [pid for jvm in _children_named("java") for pid in (jvm, *descendants(jvm))]


@contextlib.contextmanager
def local_cluster(scratch: str) -> Iterator[LocalCluster]:
    """A 3-node JetStream cluster in a new folder of ``scratch``, stopped and removed after."""
    directory = os.path.join(scratch, f"cluster-{time.monotonic_ns()}")
    cluster = LocalCluster(directory).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def store_under_test(setup: Setup, scratch: str, timeout_s: float) -> Iterator[Store]:
    """A fresh server (and cluster, on JetStream) holding ``setup``'s streams, all stopped after.

    Its Prometheus metrics answer at ``metrics_url``. Raises :class:`NotRun`
    when the store refuses a stream (naming its limit) or takes more than
    ``timeout_s`` to create them.
    """
    metrics = f"127.0.0.1:{free_port()}"
    with contextlib.ExitStack() as stack:
        where = None
        if setup.storage == "jetstream":
            cluster = stack.enter_context(local_cluster(scratch))
            where = ["--storage", "jetstream", "--nats-url", ",".join(cluster.urls)]
        server = stack.enter_context(StoreServerProcess("--metrics-listen", metrics, where=where))
        began = time.monotonic()
        segments = _create(setup, server.uri, began + timeout_s)
        yield Store(
            setup,
            server.uri,
            server.pid,
            cluster_nodes() if where else [],
            segments,
            f"http://{metrics}/metrics",
            time.monotonic() - began,
        )


def _create(setup: Setup, uri: str, deadline: float) -> list[str]:
    """Creates ``setup``'s streams; their segments in order."""
    segments: list[str] = []
    with StoreClient(uri, call_timeout_s=120) as client:
        client.create_scope(SCOPE)
        for made, name in enumerate(setup.streams):
            if time.monotonic() > deadline:
                msg = f"{made:,} of {len(setup.streams):,} streams created before the timeout"
                raise NotRun(msg)
            try:
                described = client.create_stream(SCOPE, name.partition("/")[2], setup.width)
            except TidemarkError as refused:
                msg = f"refused: {refused}"
                raise NotRun(msg) from None
            segments += [s.segment for s in described.segments]
    return segments


def each_setup(args: argparse.Namespace, scratch: str, skipped: list[Skipped]) -> Iterator[Store]:
    """Each setup of the grid on a fresh store; a refused one is noted in ``skipped``."""
    for setup in setups(args):
        print(f"{setup.label}: creating ...", flush=True)
        try:
            with store_under_test(setup, scratch, args.start_timeout) as store:
                print(f"  created in {store.create_seconds:.1f} s", flush=True)
                yield store
        except NotRun as reason:
            print(f"  not run: {reason}", flush=True)
            skipped.append(Skipped(setup.label, str(reason)))


def request_counts(metrics_url: str) -> dict[str, float]:
    """Calls the server answered so far, by method (its ``tidemark_requests`` counter)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "tidemark_requests":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                method = sample.labels["method"]
                counts[method] = counts.get(method, 0.0) + sample.value
    return counts


class CpuWindow:
    """CPU of process groups and the server's calls over a timed window, per second.

    ``groups`` maps a role to a function giving its processes now (read at
    the start and at the end: a process started in between counts from its
    start, one gone by the end is left out). ``percent`` is % of one core by
    role; ``calls`` the server's calls per second by method.
    """

    def __init__(self, groups: Mapping[str, Callable[[], Sequence[int]]], metrics_url: str):
        self._groups = groups
        self._metrics_url = metrics_url
        self.percent: dict[str, float] = {}
        self.calls: dict[str, float] = {}
        self.seconds = 0.0

    def _sample(self) -> dict[str, dict[int, float]]:
        return {
            role: {pid: cpu_seconds(pid) or 0.0 for pid in pids()}
            for role, pids in self._groups.items()
        }

    def __enter__(self) -> CpuWindow:
        self._calls = request_counts(self._metrics_url) if self._metrics_url else {}
        self._before = self._sample()
        self._began = time.monotonic()
        return self

    def __exit__(self, *exc_info: object) -> None:
        after = self._sample()
        self.seconds = time.monotonic() - self._began
        for role, now in after.items():
            before = self._before[role]
            used = sum(cpu - before.get(pid, 0.0) for pid, cpu in now.items())
            self.percent[role] = 100 * used / self.seconds
        if self._metrics_url:
            calls = request_counts(self._metrics_url)
            self.calls = {
                method: (count - self._calls.get(method, 0.0)) / self.seconds
                for method, count in sorted(calls.items())
                if count > self._calls.get(method, 0.0)
            }


@dataclass
class Ticker:
    """Calls ``tick`` every ``every_s`` on a fixed schedule in a thread, until stopped.

    ``events_per_tick`` is what one tick writes, for the rate achieved;
    ``late`` counts ticks that started more than one period late; a tick
    that raised stops the ticker and is raised again by :meth:`stop`.
    """

    tick: Callable[[int], None]
    events_per_tick: int
    every_s: float = WRITE_EVERY_S
    ticks: int = 0
    late: int = 0
    _began: float = 0.0
    _ended: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def start(self) -> Ticker:
        self._began = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="scale-writes", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                due = self._began + self.ticks * self.every_s
                pause = due - time.monotonic()
                if pause < -self.every_s:
                    self.late += 1
                if pause > 0 and self._stop.wait(pause):
                    break
                self.tick(self.ticks)
                self.ticks += 1
        except BaseException as error:  # raised again by stop()
            self._error = error

    def stop(self) -> None:
        self._stop.set()
        self._ended = time.monotonic()
        if self._thread is not None:
            self._thread.join(60)
        if self._error is not None:
            msg = f"the writes failed: {self._error!r}"
            raise BenchFailure(msg) from self._error

    @property
    def rate(self) -> float:
        """Events per second written."""
        seconds = (self._ended or time.monotonic()) - self._began
        return self.ticks * self.events_per_tick / seconds if seconds > 0 else 0.0


@contextlib.contextmanager
def writes_to_store(store: Store, load: str) -> Iterator[Ticker | None]:
    """Under the ``writes`` load, appends to :meth:`Store.written_segments` until the block ends."""
    if load != "writes":
        yield None
        return
    batch = round(WRITE_EVENTS_PER_S * WRITE_EVERY_S)
    targets = store.written_segments()
    # Writers of their own: parts share a store, and a writer's numbers starting again at 0
    # would make every append a repeat the store acknowledges without storing it.
    writers = [f"scale-{uuid.uuid4().hex[:12]}-w{n}" for n in range(len(targets))]
    events = [b"w" * 100] * batch
    with StoreClient(store.uri, call_timeout_s=60) as client:

        def tick(number: int) -> None:
            for writer, segment in zip(writers, targets, strict=True):
                client.append(segment, writer, number * batch, events)

        ticker = Ticker(tick, batch * len(targets)).start()
        try:
            yield ticker
        finally:
            ticker.stop()


@dataclass(frozen=True)
class Cell:
    """One measured window: a setup (or a peer) under a load, and what it cost.

    ``percent`` is % of one core by role (``server``, ``nats``, ``reader``,
    ``spark`` ...); ``calls`` the Tidemark server's calls per second by
    method; ``figures`` the part's own (latencies, durations), by name;
    ``skipped`` says why nothing was measured.
    """

    part: str
    system: str
    segments: int
    load: str
    percent: dict[str, float] = field(default_factory=dict)
    calls: dict[str, float] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None

    def cpu(self, role: str) -> float:
        """% of a core ``role`` used; NaN when not measured."""
        return self.percent.get(role, float("nan"))

    def figure(self, name: str) -> float:
        """The part's figure ``name``; NaN when not measured."""
        return self.figures.get(name, float("nan"))

    @property
    def shown(self) -> Mapping[str, str]:
        """Each role's CPU or figure by name, written for a table; ``-`` when not measured."""
        return _Shown({**self.figures, **self.percent})

    @property
    def calls_text(self) -> str:
        """``DescribeTails 2.0, ReadSegments 4.1`` calls/s, or ``-``."""
        shown = [f"{method} {rate:,.1f}" for method, rate in self.calls.items() if rate >= 0.05]
        return ", ".join(shown) or "-"


class _Shown(Mapping[str, str]):
    """Numbers by name written with the digits a table needs; ``-`` for a missing or NaN one."""

    def __init__(self, values: Mapping[str, float]):
        self._values = values

    def __getitem__(self, name: str) -> str:
        value = self._values.get(name)
        if value is None or math.isnan(value):
            return "-"
        if float(value).is_integer() or abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True)
class GridFigures:
    """What both scale benchmarks return: the grid run, each window measured, the setups not run.

    ``planned_s``: how long the run was planned to take (every consumer
    starting in its usual time); ``elapsed_s``: how long it took.
    """

    sizes: list[int]
    storages: list[str]
    layouts: list[str]
    loads: list[str]
    settle_s: float
    window_s: float
    cells: list[Cell]
    skipped: list[Skipped]
    planned_s: float
    elapsed_s: float
    software: tuple[str, ...]

    @property
    def planned_min(self) -> float:
        """The planned duration, minutes."""
        return self.planned_s / 60

    @property
    def elapsed_min(self) -> float:
        """How long the run took, minutes."""
        return self.elapsed_s / 60

    @property
    def target_segments(self) -> int:
        """Where the targets are judged: N = 4,096, on the file store, one stream, idle."""
        return TARGET_SEGMENTS

    @property
    def write_share(self) -> float:
        """The share of the segments the ``writes`` load writes to."""
        return WRITE_SHARE

    @property
    def write_rate(self) -> int:
        """Events per second each written segment takes under the ``writes`` load."""
        return WRITE_EVENTS_PER_S

    def at_target(self, part: str) -> Cell | None:
        """The idle cell of ``part`` where the targets are judged; None when not run."""
        label = Setup("file", "one", TARGET_SEGMENTS).label
        return next(
            (c for c in self.cells if c.part == part and c.system == label and c.load == "idle"),
            None,
        )
