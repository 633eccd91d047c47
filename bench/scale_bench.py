"""Scale benchmark: what N idle segments cost the store, a reader group and Spark, beside peers.

    python -m bench.run scale                                  # the whole grid (about 75 min)
    python -m bench.run scale --sizes 16,256 --storages file --no-write
    python -m bench.run scale --parts b --sizes 4096 --storages file --layouts one

Run it in the Spark environment (``.venv-spark/bin/python``); the Flink part
is :mod:`bench.scale_flink_bench`, in the Flink environment. For every
setup of the grid (:mod:`bench._scale_grid`: N in ``--sizes`` idle
segments, one stream of N or N/16 streams of 16, on the file store or on
JetStream on a local 3-node cluster; one fresh store server per setup, its
default flags), under each load (``idle``, then ``writes``: 1 % of the
segments take 100 events/s each), one part after the other:

a. **nothing reading**: the server's CPU over ``--window`` s;
b. **a reader group**: 2 ``EventReader`` (ingestion-time domain, defaults
   otherwise) in a process of their own (:mod:`bench._scale_client`); once
   both read, ``--settle`` s, then the CPU of the server and of the readers'
   process over the window; then, idle only, ``--probes`` probes
   ``--probe-interval-ms`` apart, each one event appended to a segment
   picked at random: its latency is from the append's acknowledgement to
   the reader's returning it. The watermark's distance from the clock is,
   for each watermark the readers returned, the wall time it was returned
   minus its value;
c. **Spark**: one query (``local[2]``, default trigger, the source's
   defaults or ``--spark-option``'s, the ``noop`` sink) over the setup's
   streams; once it reported its first trigger, ``--settle`` s, then the
   CPU of the server and of Spark (its JVM and Python workers) over the
   window, with Spark's ``latestOffset`` durations (and the source's
   planning: each less the source's wait for a change, ``idleWaitMs``) and
   micro-batch (``triggerExecution``) durations from the progress reports
   of that window.

**Peers** (``--parts peers``), once per N and load: Redis (``redis-server``,
append-only file fsynced every second) with ``XREAD BLOCK 500`` over N
stream keys, and a NATS JetStream pull consumer (no acknowledgements,
``fetch`` waiting 500 ms) over a stream of N subjects replicated on a local
3-node cluster; the client in a process of its own, as in b, with the same
CPU window and probes.

The server's calls per second by method, from its Prometheus counters
(``--metrics-listen``), are given for every window. Every wait is bounded
(``--start-timeout``; the probes' last wait by ``--probe-grace``): a
consumer that does not start in time fails the run, a store that refuses
a setup (a limit) or cannot make it in time has it recorded as not run,
with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import math
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from bench._scale_grid import (
    LOADS,
    WRITE_EVENTS_PER_S,
    WRITE_EVERY_S,
    WRITE_SHARE,
    Cell,
    CpuWindow,
    GridFigures,
    Setup,
    Skipped,
    Store,
    Ticker,
    add_grid_options,
    cluster_nodes,
    each_setup,
    java_processes,
    local_cluster,
    setups,
    writes_to_store,
)
from bench._scale_tail import Probes, TailingProcess, probe
from bench._support import (
    BenchFailure,
    ChildProcess,
    free_port,
    package_version,
    percentile,
    positive,
)
from bench.figures import Target
from connector import StoreClient

__all__ = ["ScaleFigures", "measure", "options"]

PARTS = ("a", "b", "c", "peers")
#: The issue's bounds at N = 4,096, file store, idle.
TARGET_SERVER_PERCENT = 5.0
TARGET_PROBE_P99_MS = 100.0
TARGET_LATEST_OFFSET_MS = 50.0
TARGET_IDLE_BATCH_MS = 500.0
TARGET_READER_PERCENT = 5.0
#: What a consumer usually takes to start, s, for the planned duration only.
_TYPICAL_START_S = {"a": 0.0, "b": 5.0, "c": 10.0, "peers": 8.0}
_SPARK_SESSION_S = 30.0
#: How often Spark reports a trigger that found nothing new, ms (its default: 10 s).
_IDLE_REPORT_MS = 1_000
_STORE_S = 10.0


def _window(
    processes: Mapping[str, list[int]],
    consumer: Mapping[str, Callable[[], list[int]]],
    metrics_url: str,
    seconds: float,
) -> CpuWindow:
    """A :class:`CpuWindow` over ``processes`` (fixed) and ``consumer``'s, held ``seconds``."""
    groups = {role: (lambda pids=pids: pids) for role, pids in processes.items()}
    with CpuWindow({**groups, **consumer}, metrics_url) as window:
        time.sleep(seconds)
    return window


# --- a, b, c on a store -----------------------------------------------------------------------


def run_nothing(store: Store, load: str, args: argparse.Namespace) -> Cell:
    """Part a: the server with nothing reading."""
    with writes_to_store(store, load) as writes:
        time.sleep(args.settle)
        window = _window(store.pids(), {}, store.metrics_url, args.window)
    return _cell("a", store.setup, load, window, _written(writes))


def _written(writes: Ticker | None) -> dict[str, float]:
    return {} if writes is None else {"written_per_s": writes.rate, "late_ticks": writes.late}


def _cell(part: str, setup: Setup, load: str, window: CpuWindow, figures: dict[str, float]) -> Cell:
    return Cell(part, setup.label, setup.segments, load, window.percent, window.calls, figures)


def run_readers(store: Store, load: str, args: argparse.Namespace, scratch: str) -> Cell:
    """Part b: a reader group of 2 readers in a process of their own."""
    group = f"g-{load}"
    client_args = ["tidemark", "--uri", store.uri, "--group", group]
    client_args += ["--streams", ",".join(store.setup.streams)]
    log = os.path.join(scratch, f"readers-{load}.log")
    with (
        writes_to_store(store, load) as writes,
        TailingProcess(client_args, log, "reader group") as readers,
    ):
        readers.wait_ready(args.start_timeout)
        ready_at = time.time()
        time.sleep(args.settle)
        window = _window(
            store.pids(), {"client": lambda: [readers.pid]}, store.metrics_url, args.window
        )
        figures = _written(writes)
        if load == "idle":
            figures |= _probe_store(store, readers, args).figures
    figures |= _watermarks_behind(readers.watermarks, ready_at)
    if writes is not None and readers.others is not None:
        figures["read_per_s"] = readers.others / max(1e-9, time.time() - ready_at)
    return _cell("b", store.setup, load, window, figures)


def _probe_store(store: Store, readers: TailingProcess, args: argparse.Namespace) -> Probes:
    """Probes appended to the store's segments, picked at random (seeded)."""
    pick = random.Random(args.seed)
    numbers: dict[str, int] = {}
    with StoreClient(store.uri, call_timeout_s=60) as client:

        def send(_number: int, ident: str) -> None:
            segment = pick.choice(store.segments)
            number = numbers.get(segment, 0)
            client.append(segment, "scale-probe", number, [f"p:{ident}".encode()])
            numbers[segment] = number + 1

        return _probes(send, readers, args)


def _probes(send: Callable[[int, str], None], client: TailingProcess, args: Any) -> Probes:
    return probe(send, client.probes, args.probes, args.probe_interval_ms / 1000, args.probe_grace)


def _watermarks_behind(reads: list[tuple[float, int]], since: float) -> dict[str, float]:
    """The watermark reads' distance from the clock when returned, s (p50, max), and their count."""
    behind = [wall - mark / 1000 for wall, mark in reads if wall >= since]
    return {
        "watermarks": len(behind),
        "wm_behind_p50_s": percentile(behind, 50),
        "wm_behind_max_s": max(behind, default=float("nan")),
    }


class SparkRunner:
    """One local SparkSession for the whole run, made when first needed; a query per part c."""

    def __init__(self, scratch: str):
        self._scratch = scratch
        self._session: Any = None
        self.version = ""

    def session(self) -> Any:
        if self._session is None:
            import pyspark

            import spark_adapter

            # An idle trigger's progress every second rather than every 10 s: more samples.
            config = {"spark.sql.streaming.noDataProgressEventInterval": str(_IDLE_REPORT_MS)}
            self._session = spark_adapter.local_session("tidemark-scale-bench", config=config)
            self.version = f"pyspark {pyspark.__version__}"
        return self._session

    def run(self, store: Store, load: str, args: argparse.Namespace) -> Cell:
        """Part c: one query into the ``noop`` sink; its progress over the window."""
        checkpoint = tempfile.mkdtemp(prefix="checkpoint-", dir=self._scratch)
        query = (
            self.session()
            .readStream.format("tidemark")
            .options(**dict(args.spark_option))
            .option("uri", store.uri)
            .option("stream", ",".join(store.setup.streams))
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .start()
        )
        try:
            with writes_to_store(store, load) as writes:
                _wait_for(
                    lambda: query.lastProgress is not None,
                    lambda: query.exception(),
                    args.start_timeout,
                    "Spark's first trigger",
                )
                time.sleep(args.settle)
                began = time.time()
                window = _window(
                    store.pids(), {"client": java_processes}, store.metrics_url, args.window
                )
                ended = time.time()
                figures = _written(writes) | _progress(query.recentProgress, began, ended)
        finally:
            query.stop()
            shutil.rmtree(checkpoint, ignore_errors=True)
        return _cell("c", store.setup, load, window, figures)

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()


def _wait_for(
    ready: Callable[[], bool], failed: Callable[[], object], timeout_s: float, what: str
) -> None:
    """Polls ``ready`` every 100 ms; BenchFailure once ``failed()`` says why or at ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        problem = failed()
        if problem:
            msg = f"{what}: {problem}"
            raise BenchFailure(msg)
        if time.monotonic() > deadline:
            msg = f"no {what} within {timeout_s:.0f} s"
            raise BenchFailure(msg)
        time.sleep(0.1)


def _progress(reports: list[Any], began: float, ended: float) -> dict[str, float]:
    """Spark's ``latestOffset`` and micro-batch durations (ms) of the reports within the window.

    A trigger's ``latestOffset`` duration holds the source's wait for a change
    (``idleWait``), which its reported latest offset says (``idleWaitMs``):
    the planning is the duration less that wait.
    """
    inside = []
    for report in reports:
        stamp = datetime.datetime.fromisoformat(report["timestamp"].replace("Z", "+00:00"))
        if began <= stamp.timestamp() <= ended:
            inside.append(report)
    latest = [r["durationMs"].get("latestOffset", float("nan")) for r in inside]
    waited = [_waited_ms(r) for r in inside]
    planning = [total - wait for total, wait in zip(latest, waited, strict=True)]
    # A report of a trigger that ran a micro-batch has its addBatch; an idle trigger's has not.
    ran = [r for r in inside if "addBatch" in r["durationMs"]]
    batches = [r["durationMs"]["triggerExecution"] for r in ran]
    working = [b - _waited_ms(r) for b, r in zip(batches, ran, strict=True)]
    for report in ran:  # where a micro-batch's time goes, in the log (Spark's own parts)
        print(f"  micro-batch {report['batchId']}: {json.dumps(report['durationMs'])}", flush=True)
    return {
        "reports": len(inside),
        "batches": len(ran),
        "rows": sum(r.get("numInputRows", 0) for r in inside),
        "latest_offset_p50_ms": _median(latest),
        "latest_offset_max_ms": max(latest, default=float("nan")),
        "planning_p50_ms": _median(planning),
        "planning_max_ms": max(planning, default=float("nan")),
        "waited_p50_ms": _median(waited),
        "batch_p50_ms": _median(batches),
        "batch_max_ms": max(batches, default=float("nan")),
        "batch_working_p50_ms": _median(working),
    }


def _waited_ms(report: Mapping[str, Any]) -> float:
    """How long the report's trigger waited in ``latestOffset`` (its source's ``idleWaitMs``)."""
    waited = 0.0
    for source in report.get("sources", []):
        with contextlib.suppress(TypeError, ValueError):
            waited += json.loads(source.get("latestOffset") or "{}").get("idleWaitMs", 0)
    return waited


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# --- peers -----------------------------------------------------------------------------------


def _run_peer(
    system: str,
    segments: int,
    load: str,
    server: dict[str, list[int]],
    tail: TailingProcess,
    writes: Callable[[int], None] | None,
    send: Callable[[int, str], None],
    args: argparse.Namespace,
) -> Cell:
    """A peer's client tailing: its settle, CPU window and (idle) probes, as in part b."""
    tail.wait_ready(args.start_timeout)
    per_tick = max(1, round(segments * WRITE_SHARE)) * round(WRITE_EVENTS_PER_S * WRITE_EVERY_S)
    ticker = Ticker(writes, per_tick).start() if writes is not None else None
    try:
        time.sleep(args.settle)
        window = _window(server, {"client": lambda: [tail.pid]}, "", args.window)
    finally:
        if ticker is not None:
            ticker.stop()
    figures = _written(ticker)
    if ticker is None:
        figures |= _probes(send, tail, args).figures
    return Cell("peers", system, segments, load, window.percent, {}, figures)


def run_redis(segments: int, load: str, args: argparse.Namespace, scratch: str) -> Cell:
    """Redis: ``XREAD BLOCK 500`` over ``segments`` stream keys."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        msg = "redis-server is not on the PATH (the Makefile installs it)"
        raise BenchFailure(msg)
    port = free_port()
    folder = tempfile.mkdtemp(prefix="redis-", dir=scratch)
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", folder,
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--daemonize", "no", "--logfile", ""]  # fmt: skip
    keys = [f"k{n}" for n in range(segments)]
    written = keys[:: max(1, segments // max(1, round(segments * WRITE_SHARE)))]
    pick = random.Random(args.seed)
    log = os.path.join(folder, "redis.log")
    with (
        ChildProcess(argv, log, name="redis-server", capture_stdout=False) as server,
        redis.Redis(host="127.0.0.1", port=port, socket_timeout=60) as client,
    ):
        server.wait_until(lambda: _pings(client), "answering")
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.xadd(key, {"e": b"start"})
        pipe.execute()
        batch = round(WRITE_EVENTS_PER_S * WRITE_EVERY_S)

        def write(_tick: int) -> None:
            pipe = client.pipeline(transaction=False)
            for key in written:
                for _ in range(batch):
                    pipe.xadd(key, {"e": b"w" * 100})
            pipe.execute()

        def send(_number: int, ident: str) -> None:
            client.xadd(pick.choice(keys), {"e": f"p:{ident}".encode()})

        tail_args = ["redis", "--port", str(port), "--keys", str(segments)]
        with TailingProcess(tail_args, os.path.join(folder, "client.log"), "redis client") as tail:
            return _run_peer(
                "redis", segments, load, {"server": [server.pid]}, tail,
                write if load == "writes" else None, send, args,
            )  # fmt: skip


def _pings(client: Any) -> bool:
    import redis

    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.BusyLoadingError):
        return False


class _AsyncNats:
    """A NATS connection on an event loop of its own thread, called from this one."""

    def __init__(self, urls: list[str]):
        import nats

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="nats", daemon=True)
        self._thread.start()
        self.connection = self.call(nats.connect(urls))
        self.js = self.connection.jetstream()

    def call(self, coroutine: Any, timeout_s: float = 120.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    def publish(self, messages: list[tuple[str, bytes]]) -> None:
        """Publishes each (subject, payload), a thousand at once; returns once all are acked."""

        async def all_of() -> None:
            for start in range(0, len(messages), 1_000):
                chunk = messages[start : start + 1_000]
                await asyncio.gather(*(self.js.publish(s, p) for s, p in chunk))

        self.call(all_of())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(self.connection.close(), 10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def run_nats(segments: int, load: str, args: argparse.Namespace, scratch: str) -> Cell:
    """NATS: a JetStream pull consumer over a stream of ``segments`` subjects, 3 replicas."""
    from nats.js.api import StreamConfig

    subjects = [f"peer.{n}" for n in range(segments)]
    written = subjects[:: max(1, segments // max(1, round(segments * WRITE_SHARE)))]
    batch = round(WRITE_EVENTS_PER_S * WRITE_EVERY_S)
    pick = random.Random(args.seed)
    with local_cluster(scratch) as cluster:
        nodes = cluster_nodes()
        client = _AsyncNats(cluster.urls)
        try:
            config = StreamConfig(name="PEER", subjects=["peer.>"], num_replicas=3)
            client.call(client.js.add_stream(config))
            client.publish([(subject, b"start") for subject in subjects])

            def write(_tick: int) -> None:
                client.publish([(s, b"w" * 100) for s in written for _ in range(batch)])

            def send(_number: int, ident: str) -> None:
                client.publish([(pick.choice(subjects), f"p:{ident}".encode())])

            tail_args = ["nats", "--urls", ",".join(cluster.urls), "--stream", "PEER"]
            tail_args += ["--subject-prefix", "peer"]
            log = os.path.join(scratch, f"nats-client-{segments}-{load}.log")
            with TailingProcess(tail_args, log, "nats client") as tail:
                return _run_peer(
                    "nats", segments, load, {"server": nodes}, tail,
                    write if load == "writes" else None, send, args,
                )  # fmt: skip
        finally:
            client.close()


# --- the run ---------------------------------------------------------------------------------


def planned_seconds(args: argparse.Namespace) -> float:
    """How long the run takes when every consumer starts in its usual time (a rough guide)."""
    grid = len(setups(args))
    store_parts = [p for p in args.parts if p != "peers"]
    probe_s = args.probes * args.probe_interval_ms / 1000
    per_load = {
        load: sum(
            _TYPICAL_START_S[p] + args.settle + args.window + (probe_s if p == "b" else 0)
            for p in store_parts
        )
        for load in args.loads
    }
    total = grid * (_STORE_S + sum(per_load.values()))
    if "peers" in args.parts:
        peer = _TYPICAL_START_S["peers"] + args.settle + args.window
        total += (
            len(args.sizes) * 2 * sum(peer + (probe_s if x == "idle" else 0) for x in args.loads)
        )
    return total + (_SPARK_SESSION_S if "c" in args.parts else 0)


def measure(args: argparse.Namespace) -> ScaleFigures:
    """Every setup of the grid, each load, each part; then the peers."""
    began = time.monotonic()
    planned = planned_seconds(args)
    print(f"planned: about {planned / 60:.0f} min", flush=True)
    cells: list[Cell] = []
    skipped: list[Skipped] = []
    loads = [load for load in LOADS if load in args.loads]
    with tempfile.TemporaryDirectory(prefix="tidemark-scale-bench-") as scratch:
        spark = SparkRunner(scratch)
        try:
            for store in each_setup(args, scratch, skipped):
                for load in loads:
                    for part in [p for p in args.parts if p != "peers"]:
                        print(f"  {load}, part {part} ...", flush=True)
                        if part == "a":
                            cell = run_nothing(store, load, args)
                        elif part == "b":
                            cell = run_readers(store, load, args, scratch)
                        else:
                            cell = spark.run(store, load, args)
                        print(f"    server {cell.cpu('server'):.1f} % of a core", flush=True)
                        cells.append(cell)
            if "peers" in args.parts:
                for segments in args.sizes:
                    for load in loads:
                        for run_peer in (run_redis, run_nats):
                            print(f"peer {run_peer.__name__[4:]}, {segments:,}, {load} ...")
                            cells.append(run_peer(segments, load, args, scratch))
        finally:
            spark.stop()
    software = [f"grpcio {grpc.__version__}", f"redis-py {package_version('redis')}"]
    software += [
        f"nats-py {package_version('nats-py')}",
        *([spark.version] if spark.version else []),
    ]
    return ScaleFigures(
        sizes=list(args.sizes),
        storages=list(args.storages),
        layouts=list(args.layouts),
        loads=list(args.loads),
        settle_s=args.settle,
        window_s=args.window,
        cells=cells,
        skipped=skipped,
        planned_s=planned,
        elapsed_s=time.monotonic() - began,
        software=tuple(software),
        parts=list(args.parts),
        probes=args.probes,
        probe_interval_ms=args.probe_interval_ms,
        spark_options=[f"{name}={value}" for name, value in args.spark_option],
    )


@dataclass(frozen=True)
class ScaleFigures(GridFigures):
    """The windows of parts a, b, c and the peers (:class:`GridFigures`), and the settings."""

    parts: list[str]
    probes: int
    probe_interval_ms: int
    #: Part c's source options besides the streams (``name=value``; none: the defaults).
    spark_options: list[str] = field(default_factory=list)
    cells_by_part: dict[str, list[Cell]] = field(init=False)

    def __post_init__(self) -> None:
        by_part: dict[str, list[Cell]] = {part: [] for part in PARTS}
        for cell in self.cells:
            by_part[cell.part].append(cell)
        object.__setattr__(self, "cells_by_part", by_part)

    @property
    def targets(self) -> dict[str, Target]:
        """The issue's targets at N = 4,096 on the file store, idle; not measured when not run."""
        b, c = self.at_target("b"), self.at_target("c")
        return {
            "server_b": Target(_cpu(b, "server"), "<", TARGET_SERVER_PERCENT, "%"),
            "server_c": Target(_cpu(c, "server"), "<", TARGET_SERVER_PERCENT, "%"),
            "probe_p99": Target(_figure(b, "p99_ms"), "<", TARGET_PROBE_P99_MS, "ms"),
            "latest_offset": Target(
                _figure(c, "planning_p50_ms"), "<", TARGET_LATEST_OFFSET_MS, "ms"
            ),
            "idle_batch": Target(_figure(c, "batch_p50_ms"), "<", TARGET_IDLE_BATCH_MS, "ms"),
            "reader": Target(_cpu(b, "client"), "<", TARGET_READER_PERCENT, "%"),
            "largest_cpu": Target(self._largest("percent"), "<", 100.0, "%"),
            "largest_missed": Target(self._largest("missed"), "<=", 0),
        }

    @property
    def spark_source(self) -> str:
        """How part c's query reads: the source's defaults, or the options it was given."""
        given = ", ".join(f"`{option}`" for option in self.spark_options)
        return f"the source's defaults but {given}" if given else "the source's defaults"

    def _largest(self, what: str) -> float | None:
        """At N = 16,384: the highest CPU of a process, or the probes missed; None if not run."""
        cells = [c for c in self.cells if c.segments == 16_384]
        if not cells:
            return None
        if what == "percent":
            return max((v for c in cells for v in c.percent.values()), default=None)
        return sum(c.figures.get("missed", 0) for c in cells)


def _cpu(cell: Cell | None, role: str) -> float | None:
    """% of a core ``role`` used in ``cell``; None when not measured."""
    return _known(cell.cpu(role)) if cell is not None else None


def _figure(cell: Cell | None, name: str) -> float | None:
    """``cell``'s figure ``name``; None when not measured."""
    return _known(cell.figure(name)) if cell is not None else None


def _known(value: float) -> float | None:
    return None if math.isnan(value) else value


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(prog="scale_bench", description=__doc__.split("\n")[0])
    add_grid_options(parser)

    def parts(text: str) -> list[str]:
        chosen = [p.strip() for p in text.split(",") if p.strip()]
        if not chosen or set(chosen) - set(PARTS):
            msg = f"{text!r}: choose from {','.join(PARTS)} (d is scale_flink's)"
            raise argparse.ArgumentTypeError(msg)
        return chosen

    parser.add_argument("--parts", type=parts, default=list(PARTS), help="a,b,c,peers (all)")
    parser.add_argument("--probes", type=positive, default=50, help="probes per tailing (50)")
    parser.add_argument(
        "--probe-interval-ms", type=positive, default=200, help="ms between probes (200)"
    )
    parser.add_argument(
        "--probe-grace", type=float, default=30.0, help="s to wait for the last probes (30)"
    )
    parser.add_argument("--seed", type=int, default=31, help="picks the probes' segments")
    parser.add_argument(
        "--spark-option",
        type=_name_value,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a source option of part c's query, such as timeDomain=IngestionTime (repeatable)",
    )
    return parser


def _name_value(text: str) -> tuple[str, str]:
    """``name=value`` as a pair."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        msg = f"{text!r}: expected NAME=VALUE, such as timeDomain=IngestionTime"
        raise argparse.ArgumentTypeError(msg)
    return name.strip(), value.strip()
