"""Scale benchmark, Flink: what N idle segments cost the store with one Flink job reading them.

    .venv-flink/bin/python -m bench.run scale_flink              # the whole grid (about 40 min)
    .venv-flink/bin/python -m bench.run scale_flink --sizes 16 --storages file --no-write

Part d of :mod:`bench.scale_bench`, in the Flink environment, over the same
grid (:mod:`bench._scale_grid`) and loads. For each setup and load, one job
on a local mini-cluster (parallelism 2, Python workers in processes of
their own as on a cluster): :class:`flink_adapter.FlinkTidemarkReader` with
the builder's defaults but the ingestion-time domain (without which it has
no watermark), over the setup's streams, into Flink's ``DiscardingSink``.
Once its readers have taken a first epoch, ``--settle`` s, then over
``--window`` s the CPU of the server and of Flink (the JVM and its Python
workers) and the epochs: each epoch ends with a record the coordinator
sends every reader subtask, so on an idle stream the readers' records in
per subtask are the epochs, and an epoch's period (planning and the 50 ms
interval after it; on an idle stream, mostly the idle wait its plan waits
on the store) is the window over them. Then, over another ``--window``
s, the store's watermark every 50 ms (the lowest of every segment's, one
incremental ``DescribeTails`` call) and Flink's every 250 ms (the sink's
``currentInputWatermark``, the lowest over its subtasks, over the REST
API, whose metrics are fetched every 200 ms): how far each is behind the
clock, and how long Flink's is behind the store's (:class:`StoreWatermarks`).

That last one is a time, not a difference of watermarks: an idle stream's
segments tick together, so the store's watermark rises in steps of a tick
round (10 s), and a sample taken in the few hundred ms between the
store's step and Flink's would show a whole round as the gap however
soon Flink followed (the 10 s seen before this measure).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import grpc

from bench._scale_grid import (
    LOADS,
    Cell,
    CpuWindow,
    GridFigures,
    Skipped,
    Store,
    add_grid_options,
    each_setup,
    java_processes,
    setups,
    writes_to_store,
)
from bench._support import BenchFailure, free_port, java_version, package_version, percentile
from bench.figures import Target
from connector import StoreClient
from connector.reader.tails import TailCache

__all__ = ["ScaleFlinkFigures", "StoreWatermarks", "measure", "options"]

# As in bench.flink_bench: a Python worker process per subtask, as on a cluster, not
# PyFlink's local "loopback" running them all in this process.
os.environ.setdefault("_python_worker_execution_mode", "process")

PARALLELISM = 2
SINK = "scale_sink"
#: How often the mini-cluster fetches its metrics for the REST API, ms, and the samples' period.
METRICS_MS = 200
SAMPLE_S = 0.25
#: How often the store's watermark is sampled, s: how closely its rises are timed.
STORE_SAMPLE_S = 0.05
#: The builder's epoch interval, ms: an epoch's period is its planning and this.
EPOCH_INTERVAL_MS = 50
TARGET_SERVER_PERCENT = 5.0
TARGET_BEHIND_STORE_S = 1.0
_TYPICAL_START_S = 20.0


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        return json.load(answer)


class FlinkJob:
    """A job followed over its mini-cluster's REST API: its readers' records in, its watermark."""

    def __init__(self, port: int, client: Any):
        self.port = port
        self.client = client
        self.job = str(client.get_job_id())

    def _vertices(self) -> list[dict[str, Any]]:
        return _get(self.port, f"/jobs/{self.job}")["vertices"]

    def failed(self) -> str | None:
        """Why the job ended, when it did."""
        status = self.client.get_job_status().result().name
        return None if status in ("RUNNING", "CREATED", "INITIALIZING") else f"the job is {status}"

    def records_in(self) -> int:
        """Records the readers' subtasks took in so far, over all of them."""
        for vertex in self._vertices():
            if vertex["name"].startswith("Tidemark source"):
                return sum(self._values(vertex["id"], re.compile(r"^\d+\.numRecordsIn$")))
        return 0

    def _values(self, vertex: str, metric: re.Pattern[str]) -> list[int]:
        """The values of ``vertex``'s metrics whose ids match ``metric`` (one per subtask)."""
        base = f"/jobs/{self.job}/vertices/{vertex}/metrics"
        ids = [m["id"] for m in _get(self.port, base) if metric.match(m["id"])]
        if not ids:
            return []
        query = urllib.parse.urlencode({"get": ",".join(ids)})
        return [int(float(m["value"])) for m in _get(self.port, f"{base}?{query}")]

    def watermark(self) -> int | None:
        """The sink's input watermark, the lowest over its subtasks; None before the first."""
        metric = re.compile(rf"^\d+\.{SINK}.*\.currentInputWatermark$")
        for vertex in self._vertices():
            marks = self._values(vertex["id"], metric)
            if marks:
                return min(marks) if min(marks) >= 0 else None
        return None

    def cancel(self) -> None:
        try:
            self.client.cancel().result()
        except Exception as error:  # noqa: BLE001 - a job that ended already
            print(f"    cancelling: {error}", flush=True)


def _start(store: Store, port: int) -> FlinkJob:
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors import Sink
    from pyflink.java_gateway import get_gateway

    from flink_adapter import FlinkTidemarkReader, TimeDomain

    configuration = Configuration()
    configuration.set_string("parallelism.default", str(PARALLELISM))
    configuration.set_string("rest.port", str(port))
    configuration.set_string("rest.address", "127.0.0.1")
    configuration.set_string("metrics.fetcher.update-interval", str(METRICS_MS))
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    builder = FlinkTidemarkReader.builder().with_store(store.uri)
    for stream in store.setup.streams:
        builder = builder.for_stream(stream)
    reader = builder.with_time_domain(TimeDomain.INGESTION_TIME).build()
    discarding = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2
    reader.create_stream(env).sink_to(Sink(discarding.DiscardingSink())).name(SINK)
    return FlinkJob(port, env.execute_async(f"scale {store.setup.label}"))


class StoreWatermarks:
    """The store's watermark as sampled over time, and how long another one is behind it."""

    def __init__(self) -> None:
        self._samples: list[tuple[float, int]] = []  # (time s, watermark ms), in time order

    def add(self, at: float, watermark: int) -> None:
        """The store's watermark was ``watermark`` at ``at`` (s, sampled in time order)."""
        self._samples.append((at, watermark))

    def behind(self, watermark: int, at: float) -> float:
        """How long ``watermark``, seen at ``at``, is behind the store's, s (0: not behind).

        The time since the store's watermark was last sampled at or below
        it: the store's passed it after that sample, so this is at most a
        sample's period more than the truth, never less. A watermark below
        every sample is counted from the first (at least that long).
        """
        earlier = [(t, w) for t, w in self._samples if t <= at]
        if not earlier or earlier[-1][1] <= watermark:
            return 0.0
        passed = [t for t, w in earlier if w <= watermark]
        return at - (passed[-1] if passed else earlier[0][0])


def _store_watermark(tails: TailCache) -> int:
    """The lowest watermark over every open segment, described again (one incremental call)."""
    return min(tail.watermark for tail in tails.refresh().values() if not tail.sealed)


def _watermarks(store: Store, job: FlinkJob, seconds: float) -> dict[str, float]:
    """The store's and Flink's watermarks behind the clock, and Flink's behind the store's, s."""
    ours = StoreWatermarks()
    store_behind, flink_behind, gaps = [], [], []
    with StoreClient(store.uri, call_timeout_s=60) as client:
        tails = TailCache(client, store.setup.streams)
        deadline = time.monotonic() + seconds
        flink_due = 0.0
        while time.monotonic() < deadline:
            watermark = _store_watermark(tails)
            ours.add(time.time(), watermark)
            if time.monotonic() >= flink_due:
                flink_due = time.monotonic() + SAMPLE_S
                store_behind.append(time.time() - watermark / 1000)
                flink = job.watermark()
                at = time.time()  # after the answer: the figure is not flattered
                if flink is not None:
                    flink_behind.append(at - flink / 1000)
                    gaps.append(ours.behind(flink, at))
            time.sleep(STORE_SAMPLE_S)
    return {
        "samples": len(store_behind),
        "store_behind_p50_s": percentile(store_behind, 50),
        "flink_behind_p50_s": percentile(flink_behind, 50),
        "flink_behind_store_p50_s": percentile(gaps, 50),
        "flink_behind_store_max_s": max(gaps, default=float("nan")),
    }


def run_flink(store: Store, load: str, args: argparse.Namespace) -> Cell:
    """Part d: one Flink job over the setup's streams; CPU, epochs, then the watermarks."""
    job = _start(store, free_port())
    try:
        with writes_to_store(store, load) as writes:
            deadline = time.monotonic() + args.start_timeout
            while job.records_in() == 0:
                problem = job.failed()
                if problem or time.monotonic() > deadline:
                    msg = f"{store.setup.label}: no epoch within {args.start_timeout:.0f} s"
                    raise BenchFailure(f"{msg} ({problem})" if problem else msg)
                time.sleep(0.5)
            time.sleep(args.settle)
            before = job.records_in()
            groups = {role: (lambda pids=pids: pids) for role, pids in store.pids().items()}
            with CpuWindow({**groups, "client": java_processes}, store.metrics_url) as window:
                time.sleep(args.window)
            epochs = (job.records_in() - before) / PARALLELISM
            figures = _watermarks(store, job, args.window)
            if writes is not None:
                figures |= {"written_per_s": writes.rate, "late_ticks": writes.late}
            elif epochs > 0:
                figures["epoch_s"] = window.seconds / epochs
    finally:
        job.cancel()
    return Cell("d", store.setup.label, store.setup.segments, load, window.percent,
                window.calls, figures)  # fmt: skip


@dataclass(frozen=True)
class ScaleFlinkFigures(GridFigures):
    """The grid's windows of part d (:class:`GridFigures`), and the job's settings."""

    epoch_interval_ms: int = EPOCH_INTERVAL_MS
    sample_ms: float = SAMPLE_S * 1000
    store_sample_ms: float = STORE_SAMPLE_S * 1000
    metrics_ms: int = METRICS_MS

    @property
    def targets(self) -> dict[str, Target]:
        """At N = 4,096, file store, one stream, idle: the server's CPU, Flink's watermark."""
        cell = self.at_target("d")
        server = None if cell is None else cell.percent.get("server")
        behind = None if cell is None else cell.figures.get("flink_behind_store_max_s")
        return {
            "server_d": Target(server, "<", TARGET_SERVER_PERCENT, "%"),
            "watermark": Target(behind, "<=", TARGET_BEHIND_STORE_S, "s"),
        }


def planned_seconds(args: argparse.Namespace) -> float:
    """How long the run takes when every job starts in its usual time (a rough guide)."""
    per_load = _TYPICAL_START_S + args.settle + 2 * args.window
    return len(setups(args)) * (10.0 + len(args.loads) * per_load)


def measure(args: argparse.Namespace) -> ScaleFlinkFigures:
    """Every setup of the grid, each load: one Flink job."""
    began = time.monotonic()
    planned = planned_seconds(args)
    print(f"planned: about {planned / 60:.0f} min", flush=True)
    cells: list[Cell] = []
    skipped: list[Skipped] = []
    with tempfile.TemporaryDirectory(prefix="tidemark-scale-flink-") as scratch:
        for store in each_setup(args, scratch, skipped):
            for load in [x for x in LOADS if x in args.loads]:
                print(f"  {load}, part d ...", flush=True)
                cell = run_flink(store, load, args)
                print(f"    server {cell.cpu('server'):.1f} % of a core", flush=True)
                cells.append(cell)
    software = (
        f"grpcio {grpc.__version__}",
        f"apache-flink {package_version('apache-flink')}",
        java_version(),
    )
    return ScaleFlinkFigures(
        list(args.sizes), list(args.storages), list(args.layouts), list(args.loads),
        args.settle, args.window, cells, skipped, planned, time.monotonic() - began, software,
    )  # fmt: skip


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(prog="scale_flink_bench", description=__doc__.split("\n")[0])
    add_grid_options(parser)
    return parser
