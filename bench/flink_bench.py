"""Flink benchmark: the tidemark source beside Flink's file source, and watermark latency.

    python -m bench.run flink                       # 1,000,000 events, 30 s of latency
    python -m bench.run flink --events 200000 --latency-seconds 10 --no-write

Run it in the Flink environment (``.venv-flink/bin/python``). A store server
subprocess (``python -m connector.server``, no idle ticks) holds ``--events``
JSON events of exactly 100 bytes in a 2-segment stream, and the same events,
byte for byte, are JSON-lines files. Jobs one after the other (:data:`JOBS`),
on a local mini-cluster at parallelism 2; in process mode with a Python
worker process per subtask as on a cluster (not PyFlink's local "loopback",
which runs all of them in the client process), in thread mode in the
TaskManager's JVM (pemja). Each job reports which mode its source's Python
actually ran in (``tidemark.pythonThreadMode`` over the REST API) and the
benchmark fails if it is not the one asked for.

First a warm-up job, not judged (the JVM keeps compiling the code every job
shares over the first jobs of a run, which would favour the later jobs).

- **tidemark, process / thread** (each without and with
  ``pipeline.object-reuse``): :class:`flink_adapter.FlinkTidemarkReader`
  (unbounded, from the earliest position, ``json`` deserialization, the
  builder's defaults but the mode), its DataStream into Flink's
  ``DiscardingSink`` (no Python stage after the source);
- **file**: Flink's ``filesystem`` table connector with the ``json`` format
  over the files, ``--file-copies`` times over (hard links), so that its
  steady state lasts several polls (watching the folder, so it too keeps
  running), into the ``blackhole`` sink: the JVM's ceiling;
- **the user's view**, in each mode: what a PyFlink job costs, its source
  feeding a Python ``map`` that parses each event's JSON and returns one
  field, into the discarding sink: the tidemark source's table, its
  ``event`` column made a DataStream, beside the file source with the
  ``raw`` format (each line a string) made one, into the same ``map``
  (``--map-events`` events each); and once the source's DataStream rows,
  every column, into the map (``tidemark rows + map``).

Each job is followed through the mini-cluster's REST API: the sink
operator's ``numRecordsIn`` over its subtasks, polled every 500 ms, and the
job is cancelled once every event reached it (a job that fails fails the
benchmark at once). **Steady state** is events per second between the polls
that saw 10 % and 90 % of the events, with the CPU time each process took
over the same span, per event: the JVM (thread mode's Python runs in it),
PyFlink's Python workers (process mode) and the store server; **start** is
from submitting the job to the first poll that saw a row.

Watermark latency: one more job reads another stream in the ingestion-time
domain (event time from the events' ``ts``, ``max_event_time_lag`` 0) into a
keyed function that sets an event-time timer at each event's time; a timer
fires once Flink's watermark at that function covers it. The job sets a
network buffer timeout of 5 ms, as the README advises for low latency. A writer appends
``--rate`` events per second in batches every 10 ms for
``--latency-seconds``, once the job runs (a timer fired); each batch's
latency is from its append's acknowledgement to the firing of the timer of
its last event. The first 5 seconds are left out (warm-up). After the
measured batches one closing batch goes to every segment (not measured):
without it, a last batch whose first append the store stamped in the same
millisecond as its ``ts`` leaves its segment's watermark at ``ts - 1`` (the
store's T - 1 rule), and with idle ticks off nothing would move it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import Sink
from pyflink.datastream.functions import (
    KeyedProcessFunction,
    RuntimeContext,
)
from pyflink.java_gateway import get_gateway
from pyflink.table import StreamTableEnvironment
from pyflink.table.expressions import col

from bench._support import (
    EVENT_BYTES,
    BenchFailure,
    StoreServerProcess,
    children,
    cpu_seconds,
    descendants,
    free_port,
    java_version,
    json_event,
    package_version,
    positive,
    write_store_and_files,
)
from bench.figures import Percentiles, Target
from connector import EventWriter, StoreClient, StringSerializer
from connector.client.routing import key_position
from flink_adapter import FlinkTidemarkReader, TimeDomain
from flink_adapter.python_mode import PROCESS, THREAD, configure_job

__all__ = ["FlinkFigures", "measure", "options"]

# The Python workers unpickle this module's functions: they cannot import it.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
# On a local mini-cluster PyFlink runs every subtask's Python functions in this process
# ("loopback"), all under one interpreter lock; a cluster gives each subtask a worker
# process. Process mode is how PyFlink's own tests get the cluster's layout locally.
os.environ.setdefault("_python_worker_execution_mode", "process")

#: Thread mode against process mode, the same job in the same run (issue 25).
TARGET_THREAD_SPEEDUP = 2.0
#: (tidemark + Python map) / (file source + the same Python map).
TARGET_USER_VIEW_RATIO = 0.7
TARGET_LATENCY_P99_MS = 150
#: The latency job's network buffer timeout, ms (the README's advice for low latency).
LATENCY_BUFFER_TIMEOUT_MS = 5
PARALLELISM = 2
# No idle ticks while the benchmark runs: 10^9 ms, about 11.6 days.
NO_IDLE_TICKS_MS = 1_000_000_000
WARM_UP_S = 5.0
# How often the sink's count is fetched and polled, ms: the metric fetcher's work takes
# the jobs' CPU (at 100 ms it took about a quarter of the JVM's samples).
POLL_MS = 500


@dataclass(frozen=True)
class Job:
    """A throughput job: its source, the Python execution mode, object reuse, the user's map.

    ``map_of``: None, no map; ``"event"``, the source's one column the map
    needs (tidemark: its table's ``event``; file: each line) into the map;
    ``"rows"``, the tidemark source's DataStream rows, every column, into it.
    """

    source: str  # "tidemark" or "file"
    mode: str | None = None  # None: a job with no Python
    object_reuse: bool = False
    map_of: str | None = None

    @property
    def label(self) -> str:
        """``tidemark + map, thread``, ``file, object reuse`` ..."""
        name = {None: self.source, "event": f"{self.source} + map"}.get(
            self.map_of, f"{self.source} {self.map_of} + map"
        )
        return ", ".join(
            [name, *([self.mode] if self.mode else []), *(["object reuse"] * self.object_reuse)]
        )


#: The throughput jobs, in order (each mode's beside the other's, so that the JVM's
#: warming up, which goes on over several jobs, does not favour one of them).
JOBS = (
    Job("tidemark", PROCESS),
    Job("tidemark", THREAD),
    Job("tidemark", PROCESS, object_reuse=True),
    Job("tidemark", THREAD, object_reuse=True),
    Job("file"),
    Job("file", object_reuse=True),
    Job("tidemark", THREAD, map_of="event"),
    Job("file", THREAD, map_of="event"),
    Job("tidemark", PROCESS, map_of="event"),
    Job("file", PROCESS, map_of="event"),
    Job("tidemark", THREAD, map_of="rows"),
)
#: Run first and not judged, on a stream of its own: the JVM compiles the code every job
#: shares.
WARMING_JOB = Job("tidemark", PROCESS)
#: The name of the discarding sink the DataStream jobs end in.
DISCARDING_SINK = "discarding_sink"
#: The mode metric of the source's readers, over the REST API.
MODE_METRIC = "tidemark.pythonThreadMode"
BATCH_EVERY_S = 0.01


# --- what runs in the jobs ---------------------------------------------------------------


class TimerPerEvent(KeyedProcessFunction):
    """Sets an event-time timer at each event's time; a fired timer appends ``time wall-time``."""

    def __init__(self, path: str):
        self.path = path

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:  # noqa: D102
        self.file.close()

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:  # noqa: D102
        ctx.timer_service().register_event_time_timer(ctx.timestamp())
        return iter(())

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Any:  # noqa: D102
        self.file.write(f"{timestamp} {time.time()}\n")
        self.file.flush()
        return iter(())


def field_of(text: str) -> str:
    """The user's Python ``map``: parses an event's JSON and returns one field."""
    return str(json.loads(text)["key"])


# --- measuring ---------------------------------------------------------------------------


@dataclass
class Throughput:
    """One job's counted run.

    ``cpu_us``: CPU microseconds per event over the steady state, by process
    (:data:`PROCESSES`); in thread mode the source's Python runs in the JVM.
    """

    system: str
    events: int
    start_s: float
    steady_events_per_s: float
    cpu_us: dict[str, float] = field(default_factory=dict)


#: Where a job's CPU time is counted: the JVM (the mini-cluster, with the Python of thread
#: mode), PyFlink's Python worker processes (process mode) and the store server.
PROCESSES = ("JVM", "Python workers", "store")


def _cpu_by_process(store_pid: int) -> dict[str, float]:
    """CPU seconds so far of the JVM (this process's child), its Python workers and the store."""
    jvms = [pid for pid in children(os.getpid()) if pid != store_pid]
    workers = [child for jvm in jvms for child in descendants(jvm)]
    return {
        name: sum(cpu_seconds(pid) or 0.0 for pid in pids)
        for name, pids in zip(PROCESSES, (jvms, workers, [store_pid]), strict=True)
    }


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout_s} s waiting for {what}"
            raise BenchFailure(msg)
        time.sleep(0.05)


def _environment(rest_port: int | None = None, object_reuse: bool = False) -> Any:
    """An environment at :data:`PARALLELISM`; with ``rest_port``, its REST API answers there."""
    configuration = Configuration()
    configuration.set_string("parallelism.default", str(PARALLELISM))
    configuration.set_string("pipeline.object-reuse", str(object_reuse).lower())
    if rest_port is not None:
        configuration.set_string("rest.port", str(rest_port))
        configuration.set_string("rest.address", "127.0.0.1")
        configuration.set_string("metrics.fetcher.update-interval", str(POLL_MS))
    return StreamExecutionEnvironment.get_execution_environment(configuration)


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
        return json.load(answer)


def _sink_count(port: int, job: str, sink: str, names: dict[str, list[str]]) -> int:
    """The rows sink table ``sink`` took so far, over its subtasks.

    The sink is chained behind other operators, so its vertex's counter
    counts what the chain takes in: the sink operator's own ``numRecordsIn``
    it is (a Table sink's writer is ``NAME[N]: Writer``, a DataStream sink's
    ``NAME: Writer``). ``names`` caches each vertex's metric names.
    """
    metric = re.compile(rf"^\d+\.({re.escape(sink)}(\[\d+\])?__Writer\.numRecordsIn)$")
    count = 0
    for vertex in _get(port, f"/jobs/{job}")["vertices"]:
        base = f"/jobs/{job}/vertices/{vertex['id']}"
        if not names.get(base):
            listed = (m.match(x["id"]) for m in [metric] for x in _get(port, base + "/metrics"))
            # One name per subtask ("0.", "1." ...) for one metric: each once, summed over all.
            names[base] = sorted({found.group(1) for found in listed if found})
        for name in names[base]:
            query = urllib.parse.urlencode({"get": name, "agg": "sum"})
            count += sum(int(x["sum"]) for x in _get(port, f"{base}/subtasks/metrics?{query}"))
    return count


def _check_mode(system: str, port: int, job: str, mode: str) -> None:
    """Fails unless every reader subtask of the source reports running in ``mode``."""
    expected = 1 if mode == THREAD else 0
    reported: list[int] = []
    deadline = time.monotonic() + 30
    while len(reported) < PARALLELISM and time.monotonic() < deadline:
        reported = []
        for vertex in _get(port, f"/jobs/{job}")["vertices"]:
            if not vertex["name"].startswith("Tidemark source"):
                continue
            base = f"/jobs/{job}/vertices/{vertex['id']}"
            ids = [m["id"] for m in _get(port, f"{base}/metrics") if m["id"].endswith(MODE_METRIC)]
            if ids:
                query = urllib.parse.urlencode({"get": ",".join(ids)})
                reported += [int(float(m["value"])) for m in _get(port, f"{base}/metrics?{query}")]
        time.sleep(POLL_MS / 1000)
    if reported != [expected] * PARALLELISM:
        msg = f"{system}: asked for {mode} mode, the readers reported {MODE_METRIC} {reported}"
        raise BenchFailure(msg)


@dataclass(frozen=True)
class JobRun:
    """Where a job is followed: its mini-cluster's REST port, and the store server's process."""

    port: int
    store_pid: int


@dataclass(frozen=True)
class Sample:
    """One poll of a job: when, the rows at its sink, and the CPU seconds of each process."""

    at: float
    count: int
    cpu: dict[str, float]


def _follow(
    system: str,
    client: Any,
    submitted: float,
    sink: str,
    run: JobRun,
    events: int,
    mode: str | None = None,
) -> Throughput:
    """Polls the sink's count until ``events`` reached it, then cancels the job.

    ``client`` is the job's client, ``submitted`` when the job was handed to
    Flink (``time.perf_counter``). ``mode``: the Python execution mode the
    source's readers must report. A job that ends before its last event (it
    failed) fails the benchmark at once.
    """
    job = str(client.get_job_id())
    names: dict[str, list[str]] = {}
    samples: list[Sample] = []
    deadline = time.monotonic() + 900
    try:
        while not samples or samples[-1].count < events:
            if time.monotonic() > deadline:
                counted = samples[-1].count if samples else 0
                msg = f"{system}: {counted:,} of {events:,} events in 900 s"
                raise BenchFailure(msg)
            time.sleep(POLL_MS / 1000)
            status = client.get_job_status().result()
            if status.is_globally_terminal_state():
                msg = f"{system}: the job ended {status.name} before its last event (Flink's log)"
                raise BenchFailure(msg)
            with contextlib.suppress(OSError, KeyError):  # the REST API not up yet
                count = _sink_count(run.port, job, sink, names)
                samples.append(Sample(time.perf_counter(), count, _cpu_by_process(run.store_pid)))
        if mode is not None:
            _check_mode(system, run.port, job, mode)
    finally:
        with contextlib.suppress(Exception):
            client.cancel().result()
    if samples[-1].count > events:
        msg = f"{system}: the sink took {samples[-1].count:,} rows for {events:,} events"
        raise BenchFailure(msg)
    first = next(sample.at for sample in samples if sample.count > 0)
    low = next(sample for sample in samples if sample.count >= events // 10)
    high = next(sample for sample in samples if sample.count >= events * 9 // 10)
    if high.at == low.at:
        msg = f"{system}: 10 % to 90 % of the events came in one poll; give it more events"
        raise BenchFailure(msg)
    counted = high.count - low.count
    rate = counted / (high.at - low.at)
    cpu_us = {name: (high.cpu[name] - low.cpu[name]) / counted * 1e6 for name in PROCESSES}
    return Throughput(system, events, first - submitted, rate, cpu_us)


def run_tidemark(
    uri: str,
    stream: str,
    events: int,
    job: Job,
    store_pid: int,
    epoch_events: int | None = None,
) -> Throughput:
    """The tidemark source (``job``) into Flink's discarding sink, until every event reached it.

    Without a map, its DataStream into the sink; with one (:func:`field_of`),
    its table's ``event`` column made a DataStream (``map_of="event"``), or
    its DataStream's rows (``"rows"``), into the map, then into the sink.
    """
    assert job.mode is not None
    run = JobRun(free_port(), store_pid)
    env = _environment(run.port, job.object_reuse)
    t_env = StreamTableEnvironment.create(env)
    builder = (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream(stream)
        .with_deserialization_schema("json")
        .with_parallelism(PARALLELISM)
        .with_python_execution_mode(job.mode)
    )
    if epoch_events is not None:
        builder = builder.with_epoch_budget(max_events=epoch_events)
    reader = builder.build()
    if job.map_of == "event":
        events_only = t_env.to_data_stream(reader.create_table(env, t_env).select(col("event")))
        rows = events_only.map(lambda row: field_of(row[0]), output_type=Types.STRING())
    elif job.map_of == "rows":
        rows = reader.create_stream(env, t_env)
        rows = rows.map(lambda row: field_of(row[1]), output_type=Types.STRING())
    else:
        rows = reader.create_stream(env, t_env)
    return _into_discarding_sink(job, env, rows, run, events)


def run_file_map(json_dir: str, events: int, job: Job, store_pid: int) -> Throughput:
    """Flink's filesystem source, each line a string, into the user's Python map (``job``)."""
    assert job.mode is not None
    run = JobRun(free_port(), store_pid)
    env = _environment(run.port)
    configure_job(env, job.mode)  # the interpreter and path thread mode needs, as the source's
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE lines (line STRING) WITH ("
        f"'connector'='filesystem', 'path'='file://{json_dir}', 'format'='raw', "
        "'source.monitor-interval'='1 h')"
    )
    lines = t_env.to_data_stream(t_env.from_path("lines"))
    rows = lines.map(lambda row: field_of(row[0]), output_type=Types.STRING())
    return _into_discarding_sink(job, env, rows, run, events)


def _into_discarding_sink(job: Job, env: Any, rows: Any, run: JobRun, events: int) -> Throughput:
    """``rows`` into Flink's discarding sink, the job followed until ``events`` arrived."""
    discarding = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2
    rows.sink_to(Sink(discarding.DiscardingSink())).name(DISCARDING_SINK)
    submitted = time.perf_counter()
    client = env.execute_async(job.label)
    mode = job.mode if job.source == "tidemark" else None
    return _follow(job.label, client, submitted, DISCARDING_SINK, run, events, mode)


def _linked_copies(json_dir: str, copies: int) -> str:
    """A folder holding each file of ``json_dir`` ``copies`` times over, as hard links."""
    copied = f"{json_dir}-x{copies}"
    os.mkdir(copied)
    for name in sorted(os.listdir(json_dir)):
        for copy in range(copies):
            os.link(os.path.join(json_dir, name), os.path.join(copied, f"copy{copy}-{name}"))
    return copied


def run_file(json_dir: str, events: int, job: Job, store_pid: int) -> Throughput:
    """Flink's filesystem source over the same events as JSON lines, into a blackhole sink."""
    run = JobRun(free_port(), store_pid)
    t_env = StreamTableEnvironment.create(_environment(run.port, job.object_reuse))
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE files (ts BIGINT, `key` STRING, `value` BIGINT, pad STRING) WITH ("
        f"'connector'='filesystem', 'path'='file://{json_dir}', 'format'='json', "
        # Watching the folder keeps the job running, as the tidemark job does.
        "'source.monitor-interval'='1 h')"
    )
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE file_sink (`key` STRING, pad STRING, ts BIGINT) "
        "WITH ('connector'='blackhole')"
    )
    submitted = time.perf_counter()
    result = t_env.execute_sql("INSERT INTO file_sink SELECT `key`, pad, ts FROM files")
    return _follow(job.label, result.get_job_client(), submitted, "file_sink", run, events)


@dataclass
class Latency(Percentiles):
    """Watermark latency per batch, in seconds."""

    rate: int
    seconds: float
    batches: list[float] = field(default_factory=list)
    unfired: int = 0

    @property
    def values_ms(self) -> list[float]:
        """Each measured batch's latency, ms."""
        return [s * 1000 for s in self.batches]


def run_latency(uri: str, rate: int, seconds: float, work: str, epoch_ms: int | None) -> Latency:
    """Steady writes; each batch's acknowledgement to the timer of its last event firing."""
    fired_path = os.path.join(work, "fired")
    with StoreClient(uri) as client:
        client.create_stream("bench", "latency", segment_count=2)
    env = _environment()
    # What the README advises a job that wants low latency: the watermark crosses a network
    # hop the source does not own (to the keyed function), and Flink's default waits 100 ms.
    env.set_buffer_timeout(LATENCY_BUFFER_TIMEOUT_MS)
    builder = (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream("bench/latency")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(0)
        .with_parallelism(PARALLELISM)
        .with_python_execution_mode("thread")  # as recorded: the latency figures are thread mode's
    )
    if epoch_ms is not None:
        builder = builder.with_epoch_interval(epoch_ms)
    reader = builder.build()
    (
        reader.create_stream(env)
        .key_by(lambda row: "all", key_type=Types.STRING())
        .process(TimerPerEvent(fired_path))
        .print()
    )
    job = env.execute_async("watermark latency")
    acks: list[tuple[int, float]] = []  # (last event's ts, acknowledged at)
    # Both segments in every batch: the group watermark is the lower of theirs.
    per_batch = max(2, round(rate * BATCH_EVERY_S))
    keys = [_key_in(0.0, 0.5), _key_in(0.5, 1.0)]
    try:
        with (
            StoreClient(uri) as client,
            EventWriter(client, "bench/latency", StringSerializer()) as writer,
        ):
            number = 0

            def write_batch() -> tuple[int, float]:
                nonlocal number
                ts = int(time.time() * 1000)
                for _ in range(per_batch):
                    key = keys[number % 2]
                    writer.write_event(json_event(number, ts, key), routing_key=key)
                    number += 1
                writer.flush()
                return ts, time.time()

            # The job starts (10-20 s): a batch every 100 ms until a timer fires.
            deadline = time.monotonic() + 180
            while not _fired(fired_path):
                if time.monotonic() > deadline:
                    msg = "no timer fired within 180 s of submitting the job"
                    raise BenchFailure(msg)
                write_batch()
                time.sleep(0.1)
            begin = time.monotonic()
            batches = 0
            while (elapsed := time.monotonic() - begin) < WARM_UP_S + seconds:
                ts, acknowledged = write_batch()
                batches += 1
                if elapsed >= WARM_UP_S:
                    acks.append((ts, acknowledged))
                time.sleep(max(0.0, begin + batches * BATCH_EVERY_S - time.monotonic()))
            # The closing batch (not measured), to every segment, appended after the last
            # measured one's millisecond: each segment's watermark then passes that batch's ts
            # (see the module docstring: the store's T - 1 rule).
            time.sleep(BATCH_EVERY_S)
            write_batch()
        last_ts = acks[-1][0]
        _wait(lambda: _fired_past(fired_path, last_ts), 60, "the last batch's timer")
    finally:
        with contextlib.suppress(Exception):
            job.cancel().result()
    fired = _fired(fired_path)
    result = Latency(rate, seconds)
    for ts, acknowledged in acks:
        if ts in fired:
            result.batches.append(fired[ts] - acknowledged)
        else:
            result.unfired += 1
    return result


def _key_in(low: float, high: float) -> str:
    """A routing key whose position lies in ``[low, high)``."""
    return next(f"k{n}" for n in range(1_000) if low <= key_position(f"k{n}") < high)


def _fired(path: str) -> dict[int, float]:
    fired: dict[int, float] = {}
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as file:
        for line in file:
            timestamp, at = line.split()
            fired.setdefault(int(timestamp), float(at))
    return fired


def _fired_past(path: str, ts: int) -> bool:
    return any(timestamp >= ts for timestamp in _fired(path))


# --- the run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DataSet:
    """The same events in a stream of the store and in JSON-lines files."""

    stream: str
    json_dir: str
    events: int


def _write(server: StoreServerProcess, args: argparse.Namespace, data: DataSet) -> DataSet:
    """Writes ``data``'s events to its stream and its files; returns it."""
    print(f"writing {data.events:,} events to {data.stream} and to files ...", flush=True)
    write_store_and_files(
        server.uri,
        data.stream,
        events=data.events,
        keys=args.keys,
        file_events=args.file_events,
        json_dir=data.json_dir,
    )
    return data


def measure(args: argparse.Namespace) -> FlinkFigures:
    """The warm-up job, the throughput jobs one after the other, then the latency job."""
    with (
        tempfile.TemporaryDirectory(prefix="tidemark-flink-bench-") as work,
        StoreServerProcess("--max-watermark-lag-ms", str(NO_IDLE_TICKS_MS)) as server,
    ):

        def data_set(name: str, events: int) -> DataSet:
            return _write(server, args, DataSet(f"{name}/events", f"{work}/{name}", events))

        warm_up = data_set("warm-up", args.warm_up_events)
        plain = data_set("bench", args.events)
        mapped = data_set("map", args.map_events)
        copies = DataSet(
            plain.stream, _linked_copies(plain.json_dir, args.file_copies), plain.events
        )
        store = (server.uri, server.pid)
        print(f"warm-up: {WARMING_JOB.label} ...", flush=True)
        warm_up_rate = _run_job(WARMING_JOB, args, store, warm_up).steady_events_per_s
        print(f"  {warm_up_rate:,.0f} events/s", flush=True)
        runs = []
        for job in JOBS:
            print(f"{job.label} ...", flush=True)
            data = mapped if job.map_of else plain if job.source == "tidemark" else copies
            run = _run_job(job, args, store, data)
            print(f"  {run.steady_events_per_s:,.0f} events/s", flush=True)
            runs.append(run)
        print(f"watermark latency: {args.latency_seconds:.0f} s ...", flush=True)
        latency = run_latency(server.uri, args.rate, args.latency_seconds, work, args.epoch_ms)
    if latency.unfired:
        msg = f"{latency.unfired} batches' timers never fired"
        raise BenchFailure(msg)
    return FlinkFigures(
        events=args.events,
        keys=args.keys,
        file_copies=args.file_copies,
        map_events=args.map_events,
        warm_up_events=args.warm_up_events,
        warm_up_rate=warm_up_rate,
        runs=runs,
        latency=latency,
        software=(f"apache-flink {package_version('apache-flink')}", java_version()),
    )


def _run_job(
    job: Job, args: argparse.Namespace, store: tuple[str, int], data: DataSet
) -> Throughput:
    """Runs ``job`` over ``data``.

    The tidemark source reads its stream, the file source its files (the
    file job without a map reads each ``--file-copies`` times).
    """
    uri, store_pid = store
    if job.source == "tidemark":
        return run_tidemark(uri, data.stream, data.events, job, store_pid, args.epoch_events)
    if job.map_of:
        return run_file_map(data.json_dir, data.events, job, store_pid)
    return run_file(data.json_dir, data.events * args.file_copies, job, store_pid)


@dataclass(frozen=True)
class FlinkFigures:
    """Each throughput job's run, the warm-up's rate, the latency job's, and the settings."""

    events: int
    keys: int
    file_copies: int
    map_events: int
    warm_up_events: int
    warm_up_rate: float
    runs: list[Throughput]
    latency: Latency
    software: tuple[str, ...]
    event_bytes: int = EVENT_BYTES
    parallelism: int = PARALLELISM
    warming_job: str = WARMING_JOB.label
    batch_every_ms: float = BATCH_EVERY_S * 1000
    warm_up_s: float = WARM_UP_S
    buffer_timeout_ms: int = LATENCY_BUFFER_TIMEOUT_MS

    @property
    def rate(self) -> dict[str, float]:
        """Steady-state events/s by job label (``tidemark, thread``)."""
        return {run.system: run.steady_events_per_s for run in self.runs}

    @property
    def ceiling(self) -> dict[str, float]:
        """Thread mode's events/s over the file job's (``plain``) and with object reuse."""
        rate = self.rate
        return {
            "plain": rate["tidemark, thread"] / rate["file"],
            "object_reuse": rate["tidemark, thread, object reuse"] / rate["file, object reuse"],
        }

    @property
    def user_view(self) -> dict[str, Target]:
        """By mode (thread, process): (tidemark + map) / (file + map), held to its target."""
        rate = self.rate
        return {
            mode: Target(
                rate[f"tidemark + map, {mode}"] / rate[f"file + map, {mode}"],
                ">=",
                TARGET_USER_VIEW_RATIO,
            )
            for mode in (THREAD, PROCESS)
        }

    @property
    def targets(self) -> dict[str, Target]:
        """Thread mode's speedup (without and with object reuse), the user's view, latency."""
        rate = self.rate
        return {
            "speedup": Target(
                rate["tidemark, thread"] / rate["tidemark, process"], ">=", TARGET_THREAD_SPEEDUP
            ),
            "speedup_reuse": Target(
                rate["tidemark, thread, object reuse"] / rate["tidemark, process, object reuse"],
                ">=",
                TARGET_THREAD_SPEEDUP,
            ),
            **{f"user_view_{mode}": target for mode, target in self.user_view.items()},
            "latency_p99": Target(self.latency.p99, "<", TARGET_LATENCY_P99_MS, "ms"),
        }


def _warm_up_events(text: str) -> int:
    """``--warm-up-events``: at least 10."""
    value = positive(text)
    if value < 10:
        msg = f"must be at least 10, got {value}"
        raise argparse.ArgumentTypeError(msg)
    return value


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(prog="flink_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=positive, default=1_000_000, help="default 1,000,000")
    parser.add_argument("--keys", type=positive, default=16, help="routing keys (default 16)")
    parser.add_argument("--file-events", type=positive, default=50_000, help="events per file")
    parser.add_argument(
        "--file-copies",
        type=positive,
        default=5,
        help="the file job reads the files this many times over (hard links), so that its "
        "steady state lasts several of the 500 ms polls (default 5)",
    )
    parser.add_argument(
        "--map-events",
        type=positive,
        default=300_000,
        help="events of each job with the user's map, slower by far (default 300,000)",
    )
    parser.add_argument(
        "--warm-up-events",
        type=_warm_up_events,
        default=500_000,
        help="events of the warm-up job, run first and not judged (default 500,000)",
    )
    parser.add_argument("--rate", type=positive, default=1_000, help="latency writes, events/s")
    parser.add_argument("--latency-seconds", type=float, default=30.0)
    parser.add_argument(
        "--epoch-ms", type=int, help="the reader's epoch interval (default: the builder's)"
    )
    parser.add_argument(
        "--epoch-events", type=int, help="the reader's events per epoch (default: the builder's)"
    )
    return parser
