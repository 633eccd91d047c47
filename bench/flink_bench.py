"""Flink benchmark: the tidemark source beside Flink's file source, and watermark latency.

    python bench/run.py flink                       # 1,000,000 events, 30 s of latency
    python bench/run.py flink --events 200000 --latency-seconds 10 --no-write

Run it in the Flink environment (``.venv-flink/bin/python``). A store server
subprocess (``python -m connector.server``, no idle ticks) holds ``--events``
JSON events of exactly 100 bytes in a 2-segment stream, and the same events,
byte for byte, are JSON-lines files. Two jobs, one after the other, on a
local mini-cluster at parallelism 2, each the same pipeline into a
discarding sink: the source, then a Python filter that counts the rows and
passes none on (to ``print()``, which so prints nothing):

- **tidemark**: :class:`flink_adapter.FlinkTidemarkReader` (unbounded, from
  the earliest position, ``json`` deserialization, the builder's defaults);
  cancelled once every event was counted;
- **file**: Flink's ``filesystem`` table connector with the ``json`` format
  over the files, turned into a DataStream; it ends by itself.

Each counting subtask appends ``count wall-time`` to a file every
``--mark`` rows. **Steady state** is events per second between the moments
the two subtasks together had counted 10 % and 90 % of the events; **start**
is from submitting the job to its first row.

Watermark latency: a third job reads another stream in the ingestion-time
domain (event time from the events' ``ts``, ``max_event_time_lag`` 0) into a
keyed function that sets an event-time timer at each event's time; a timer
fires once Flink's watermark at that function covers it. A writer appends
``--rate`` events per second in batches every 10 ms for
``--latency-seconds``, once the job runs (a timer fired); each batch's
latency is from its append's acknowledgement to the firing of the timer of
its last event. The first 5 seconds are left out (warm-up).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cloudpickle  # noqa: E402
from _support import (  # noqa: E402
    EVENT_BYTES,
    BenchFailure,
    StoreServerProcess,
    command_block,
    java_version,
    json_event,
    load_average,
    machine_facts,
    markdown_table,
    package_version,
    percentile,
    print_table,
    run_and_record,
    write_store_and_files,
)
from pyflink.common import Configuration, Types  # noqa: E402
from pyflink.datastream import StreamExecutionEnvironment  # noqa: E402
from pyflink.datastream.functions import (  # noqa: E402
    FilterFunction,
    KeyedProcessFunction,
    RuntimeContext,
)
from pyflink.table import StreamTableEnvironment  # noqa: E402

from connector import EventWriter, StoreClient, StringSerializer  # noqa: E402
from connector.client.routing import key_position  # noqa: E402
from flink_adapter import FlinkTidemarkReader, TimeDomain  # noqa: E402

__all__ = ["main"]

# The Python workers unpickle this module's functions: they cannot import it.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SECTION = "flink"
HEADING = "Flink adapter: steady-state throughput beside Flink's file source, and watermark latency"
TARGET_EVENTS_PER_S = 50_000
TARGET_RATIO = 0.5
TARGET_LATENCY_P99_MS = 300
PARALLELISM = 2
# No idle ticks while the benchmark runs: 10^9 ms, about 11.6 days.
NO_IDLE_TICKS_MS = 1_000_000_000
WARM_UP_S = 5.0
BATCH_EVERY_S = 0.01


# --- what runs in the jobs ---------------------------------------------------------------


class CountingFilter(FilterFunction):
    """Counts rows, passes none; every ``mark`` rows (and at the first) appends ``count time``."""

    def __init__(self, folder: str, mark: int):
        self.folder = folder
        self.mark = mark

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        index = runtime_context.get_index_of_this_subtask()
        self.count = 0
        self.file = open(os.path.join(self.folder, f"subtask-{index}"), "a", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:  # noqa: D102
        self.file.close()

    def filter(self, value: Any) -> bool:  # noqa: D102
        self.count += 1
        if self.count == 1 or self.count % self.mark == 0:
            self.file.write(f"{self.count} {time.time()}\n")
            self.file.flush()
        return False


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


# --- measuring ---------------------------------------------------------------------------


@dataclass
class Throughput:
    """One job's counted run."""

    system: str
    events: int
    start_s: float
    steady_events_per_s: float


def _marks(folder: str) -> list[tuple[float, int]]:
    """``(time, total count)`` over every subtask, in time order."""
    latest: dict[str, int] = {}
    points: list[tuple[float, str, int]] = []
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as file:
            for line in file:
                count, at = line.split()
                points.append((float(at), name, int(count)))
    totals = []
    for at, name, count in sorted(points):
        latest[name] = count
        totals.append((at, sum(latest.values())))
    return totals


def _counted(folder: str) -> int:
    totals = _marks(folder)
    return totals[-1][1] if totals else 0


def _throughput(system: str, folder: str, events: int, submitted: float) -> Throughput:
    totals = _marks(folder)
    first = totals[0][0]
    low = next(at for at, total in totals if total >= 0.1 * events)
    high = next(at for at, total in totals if total >= 0.9 * events)
    low_total = next(total for at, total in totals if at == low)
    high_total = next(total for at, total in totals if at == high)
    return Throughput(system, events, first - submitted, (high_total - low_total) / (high - low))


def _environment() -> Any:
    configuration = Configuration()
    configuration.set_string("parallelism.default", str(PARALLELISM))
    return StreamExecutionEnvironment.get_execution_environment(configuration)


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout_s} s waiting for {what}"
            raise BenchFailure(msg)
        time.sleep(0.05)


def run_tidemark(
    uri: str, stream: str, events: int, mark: int, work: str, epoch_events: int | None = None
) -> Throughput:
    """The tidemark source into the counting filter, until every event is counted."""
    folder = os.path.join(work, "tidemark-marks")
    os.makedirs(folder)
    env = _environment()
    builder = (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream(stream)
        .with_deserialization_schema("json")
        .with_parallelism(PARALLELISM)
    )
    if epoch_events is not None:
        builder = builder.with_epoch_budget(max_events=epoch_events)
    reader = builder.build()
    reader.create_stream(env).filter(CountingFilter(folder, mark)).print()
    submitted = time.time()
    job = env.execute_async("tidemark throughput")
    try:
        _wait(lambda: _counted(folder) >= events, 600, f"{events:,} events counted")
    finally:
        with contextlib.suppress(Exception):
            job.cancel().result()
    return _throughput("tidemark", folder, events, submitted)


def run_file(json_dir: str, events: int, mark: int, work: str) -> Throughput:
    """Flink's filesystem source over the same events as JSON lines, into the counting filter."""
    folder = os.path.join(work, "file-marks")
    os.makedirs(folder)
    env = _environment()
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(
        "CREATE TABLE events (ts BIGINT, `key` STRING, `value` BIGINT, pad STRING) WITH ("
        f"'connector'='filesystem', 'path'='file://{json_dir}', 'format'='json')"
    )
    t_env.to_data_stream(t_env.from_path("events")).filter(CountingFilter(folder, mark)).print()
    submitted = time.time()
    job = env.execute_async("file throughput")
    job.get_job_execution_result().result()
    if _counted(folder) != events:
        msg = f"the file job counted {_counted(folder):,} events, not {events:,}"
        raise BenchFailure(msg)
    return _throughput("file", folder, events, submitted)


@dataclass
class Latency:
    """Watermark latency per batch, in seconds."""

    rate: int
    seconds: float
    batches: list[float] = field(default_factory=list)
    unfired: int = 0


def run_latency(uri: str, rate: int, seconds: float, work: str, epoch_ms: int | None) -> Latency:
    """Steady writes; each batch's acknowledgement to the timer of its last event firing."""
    fired_path = os.path.join(work, "fired")
    with StoreClient(uri) as client:
        client.create_stream("bench", "latency", segment_count=2)
    env = _environment()
    builder = (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream("bench/latency")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(0)
        .with_parallelism(PARALLELISM)
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


@contextlib.contextmanager
def _scratch() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="tidemark-flink-bench-") as work:
        yield work


def _run(args: argparse.Namespace) -> str:
    args.load_before = load_average()
    with (
        _scratch() as work,
        StoreServerProcess("--max-watermark-lag-ms", str(NO_IDLE_TICKS_MS)) as server,
    ):
        json_dir = os.path.join(work, "json")
        print(f"writing {args.events:,} events to the store and to files ...", flush=True)
        write_store_and_files(
            server.uri,
            "bench/events",
            events=args.events,
            keys=args.keys,
            file_events=args.file_events,
            json_dir=json_dir,
        )
        print("tidemark job ...", flush=True)
        tidemark = run_tidemark(
            server.uri, "bench/events", args.events, args.mark, work, args.epoch_events
        )
        print(f"  {tidemark.steady_events_per_s:,.0f} events/s", flush=True)
        print("file job ...", flush=True)
        file = run_file(json_dir, args.events, args.mark, work)
        print(f"  {file.steady_events_per_s:,.0f} events/s", flush=True)
        print(f"watermark latency: {args.latency_seconds:.0f} s ...", flush=True)
        latency = run_latency(server.uri, args.rate, args.latency_seconds, work, args.epoch_ms)
    return _report(args, tidemark, file, latency)


def _report(
    args: argparse.Namespace, tidemark: Throughput, file: Throughput, latency: Latency
) -> str:
    rate = tidemark.steady_events_per_s
    ratio = rate / file.steady_events_per_s
    flink = f"apache-flink {package_version('apache-flink')}"
    rows = [["source", "steady events/s", "job start s"]]
    for run in (tidemark, file):
        rows.append([run.system, f"{run.steady_events_per_s:,.0f}", f"{run.start_s:.1f}"])
    print_table(rows)
    ms = [s * 1000 for s in latency.batches]
    p50, p99 = percentile(ms, 50), percentile(ms, 99)
    latency_rows = [
        ["rate events/s", "batches", "p50 ms", "p99 ms", "max ms", "unfired"],
        [
            f"{latency.rate:,}",
            f"{len(ms):,}",
            f"{p50:.0f}",
            f"{p99:.0f}",
            f"{max(ms):.0f}" if ms else "-",
            str(latency.unfired),
        ],
    ]
    print_table(latency_rows)

    def verdict(ok: bool) -> str:
        return "**met**" if ok else "**missed**"

    lines = [
        f"## {HEADING}",
        "",
        f"Machine: {machine_facts(flink, java_version())}. "
        f"Load average before the run: {args.load_before:.2f}.",
        "",
        *command_block(),
        "",
        f"{args.events:,} events of {EVENT_BYTES} bytes, {args.keys} keys, a 2-segment stream "
        f"and the same events as JSON-lines files; parallelism {PARALLELISM}; each job's "
        "source into a Python filter that counts and passes nothing on. Steady state: "
        "events/s between 10 % and 90 % of the events counted; job start: submit to first row.",
        "",
        markdown_table(rows),
        "",
        f"- >= {TARGET_EVENTS_PER_S:,} events/s through the adapter: {rate:,.0f}, "
        f"{verdict(rate >= TARGET_EVENTS_PER_S)}",
        f"- >= {TARGET_RATIO} of the file-source job: {ratio:.2f}, "
        f"{verdict(ratio >= TARGET_RATIO)}",
        "",
        f"Watermark latency: {latency.rate:,} events/s appended in batches every "
        f"{BATCH_EVERY_S * 1000:.0f} ms for {latency.seconds:.0f} s after {WARM_UP_S:.0f} s of "
        "warm-up; from each append's acknowledgement to the event-time timer of its last "
        "event firing (Flink's watermark at the keyed function covering it).",
        "",
        markdown_table(latency_rows),
        "",
        f"- watermark latency p99 < {TARGET_LATENCY_P99_MS} ms: {p99:.0f} ms, "
        f"{verdict(p99 < TARGET_LATENCY_P99_MS)}",
    ]
    if latency.unfired:
        msg = f"{latency.unfired} batches' timers never fired"
        raise BenchFailure(msg)
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flink_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="default 1,000,000")
    parser.add_argument("--keys", type=int, default=16, help="routing keys (default 16)")
    parser.add_argument("--file-events", type=int, default=50_000, help="events per file")
    parser.add_argument("--mark", type=int, default=1_000, help="rows between progress marks")
    parser.add_argument("--rate", type=int, default=1_000, help="latency writes, events/s")
    parser.add_argument("--latency-seconds", type=float, default=30.0)
    parser.add_argument(
        "--epoch-ms", type=int, help="the reader's epoch interval (default: the builder's)"
    )
    parser.add_argument(
        "--epoch-events", type=int, help="the reader's events per epoch (default: the builder's)"
    )
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; 0 when it ran (targets met or not), 1 when a check failed."""
    args = _parser().parse_args(argv)
    if min(args.events, args.keys, args.file_events, args.mark, args.rate) <= 0:
        print("--events, --keys, --file-events, --mark and --rate must be > 0", file=sys.stderr)
        return 2
    return run_and_record(SECTION, lambda: _run(args), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
