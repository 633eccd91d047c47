"""Where a tidemark read's time goes in Spark: per process, and within a read task's Python.

    python bench/run.py spark_profile                    # 1,000,000 events of 100 bytes
    python bench/spark_profile_bench.py --no-write       # run directly, keep RESULTS.md

Two parts, on the Spark benchmark's events (:mod:`spark_bench`: JSON events
of 100 bytes with ``ts``, 10 keys, a 2-segment stream of a store server
subprocess, and the same events as JSON-lines files):

- **processes**: the Spark benchmark's read query over the tidemark source
  and over Spark's file source, one after the other in one local[2]
  session, each into a noop sink; the CPU seconds every process used
  while it ran (from ``/proc``): the JVM (the engine, the Arrow and row
  conversions, the sink), Spark's Python workers (the read tasks:
  :func:`~connector.reader.source.read_columns` and Arrow), the source's
  driver-side Python process (planning), the store server, and this
  process. Per event: CPU microseconds over the events read.
- **a read task's Python**: the same ranges read in this process, stage by
  stage, best of three, in CPU time: the store reads (gRPC, the client's
  share), frame decoding, event times (the JSON ``ts`` field), Arrow
  batches; then the whole path as a task runs it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _support import (  # noqa: E402
    StoreServerProcess,
    command_block,
    cpu_seconds,
    descendants,
    java_version,
    load_average,
    machine_facts,
    markdown_table,
    package_version,
    print_table,
    run_and_record,
    write_store_and_files,
)

__all__ = ["main"]

SECTION = "spark_profile"
HEADING = "Spark adapter: where a tidemark read's time goes"
STREAM = "bench/events"
NO_IDLE_TICKS_MS = 1_000_000_000


def _role(pid: int, me: int, server: int) -> str:
    if pid == me:
        return "this process (the driver's Python)"
    if pid == server:
        return "store server"
    try:
        with open(f"/proc/{pid}/cmdline", encoding="utf-8", errors="replace") as file:
            command = file.read().replace("\0", " ")
    except OSError:
        return "other"
    if "java" in command.split(" ", 1)[0]:
        return "JVM"
    if "python_streaming_source_runner" in command:
        return "source process (planning)"
    if "pyspark.daemon" in command or "pyspark.worker" in command:
        return "Python workers (read tasks)"
    return "other (unnamed: exited or a helper)"


def _cpu_by_role(me: int, server: int) -> dict[int, tuple[str, float]]:
    pids = {me, *descendants(me), server}
    return {pid: (_role(pid, me, server), cpu_seconds(pid) or 0.0) for pid in pids}


def processes(spark: Any, uri: str, json_dir: str, scratch: str, times: list[int]) -> list[dict]:
    """The CPU each process used while each read query ran."""
    import spark_bench

    me = os.getpid()
    server = [p for p in descendants(me) if "connector.server" in _command(p)][0]
    found = []
    for system in ("tidemark", "file"):
        if system == "tidemark":
            frame = spark_bench.tidemark_read(spark, uri, 100_000)
        else:
            frame = spark_bench.file_read(spark, json_dir, 4)
        before = _cpu_by_role(me, server)
        began = time.perf_counter()
        run = spark_bench.run_query(
            spark, frame, system, "read", os.path.join(scratch, f"ck-{system}"), times
        )
        wall = time.perf_counter() - began
        after = _cpu_by_role(me, server)
        roles: dict[str, float] = {}
        for pid, (role, cpu) in after.items():
            roles[role] = roles.get(role, 0.0) + cpu - before.get(pid, (role, 0.0))[1]
        found.append({"system": system, "wall": wall, "steady": run.events_per_s, "roles": roles})
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", encoding="utf-8", errors="replace") as file:
            return file.read().replace("\0", " ")
    except OSError:
        return ""


def _best_cpu(work: Callable[[], Any], times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        began = time.process_time()
        work()
        best = min(best, time.process_time() - began)
    return best


def task_stages(uri: str) -> dict[str, float]:
    """CPU seconds of each stage of the read tasks' Python, the ranges read in this process."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from connector import StoreClient
    from connector.framing import decode_columns
    from connector.reader.source import EventTimes, SegmentRange, columns_of, read_range
    from spark_adapter.options import for_stream, read_spec
    from spark_adapter.reading import arrow_batches
    from spark_adapter.schema import tidemark_schema

    options = {
        "uri": uri,
        "stream": STREAM,
        "timeDomain": "IngestionTime",
        "deserializer": "json",
        "timestampField": "ts",
        "maxEventTimeLag": "5 seconds",
    }
    spec = for_stream(read_spec(options))
    schema = to_arrow_schema(tidemark_schema("json"), timezone="UTC")
    times = EventTimes(spec.time, spec.deserializer)
    with StoreClient(uri) as client:
        segments = [f"{STREAM}/{n}" for n in (0, 1)]
        ranges = [SegmentRange(s, 0, client.segment_info(s).write_offset) for s in segments]
        reads = [(r.segment, res) for r in ranges for res in read_range(client, r)]
        frames = [decode_columns(res.data, res.offset) for _, res in reads]
        columns = [columns_of(s, res.data, res.offset, times) for s, res in reads]

        def whole() -> None:
            for segment_range in ranges:
                parts = (
                    columns_of(segment_range.segment, res.data, res.offset, times)
                    for res in read_range(client, segment_range)
                )
                for _ in arrow_batches(parts, 0, schema):
                    pass

        return {
            "store reads (client's share)": _best_cpu(
                lambda: [list(read_range(client, r)) for r in ranges]
            ),
            "frame decoding": _best_cpu(
                lambda: [decode_columns(r.data, r.offset) for _, r in reads]
            ),
            "event times (JSON ts)": _best_cpu(
                lambda: [times.of(s, f) for (s, _), f in zip(reads, frames, strict=True)]
            ),
            "Arrow batches": _best_cpu(lambda: list(arrow_batches(iter(columns), 0, schema))),
            "the whole task path": _best_cpu(whole),
        }


def _run(args: argparse.Namespace) -> str:
    import spark_adapter

    load_before = load_average()
    with (
        tempfile.TemporaryDirectory(prefix="tidemark-spark-profile-") as scratch,
        StoreServerProcess("--max-watermark-lag-ms", str(NO_IDLE_TICKS_MS)) as server,
    ):
        json_dir = os.path.join(scratch, "json")
        print(f"writing {args.events:,} events ...", flush=True)
        times = write_store_and_files(
            server.uri, STREAM, events=args.events, keys=10, file_events=25_000, json_dir=json_dir
        )
        print("a read task's Python, stage by stage ...", flush=True)
        stages = task_stages(server.uri)
        spark = spark_adapter.local_session(
            "tidemark-spark-profile", config={"spark.driver.memory": "2g"}
        )
        try:
            import spark_bench

            # Spark's Python workers start with the session's first Python query: not measured.
            spark_bench.python_floor_start(spark, os.path.join(scratch, "checkpoint-nothing"))
            print("the read queries ...", flush=True)
            found = processes(spark, server.uri, json_dir, scratch, times)
        finally:
            spark.stop()
    return _report(args, stages, found, load_before)


def _report(
    args: argparse.Namespace, stages: dict[str, float], found: list[dict], load_before: float
) -> str:
    n = args.events
    roles = sorted({role for run in found for role in run["roles"]})
    rows = [
        [
            "process",
            *(f"{r['system']} CPU s" for r in found),
            *(f"{r['system']} µs/event" for r in found),
        ]
    ]
    for role in roles:
        cpu = [r["roles"].get(role, 0.0) for r in found]
        rows.append([role, *(f"{c:.2f}" for c in cpu), *(f"{c / n * 1e6:.2f}" for c in cpu)])
    totals = [sum(r["roles"].values()) for r in found]
    rows.append(["all", *(f"{t:.2f}" for t in totals), *(f"{t / n * 1e6:.2f}" for t in totals)])
    print_table(rows)
    stage_rows = [["stage", "CPU s", "µs/event"]]
    stage_rows += [[name, f"{s:.3f}", f"{s / n * 1e6:.2f}"] for name, s in stages.items()]
    print_table(stage_rows)
    steady = ", ".join(f"{r['system']} {r['steady']:,.0f} events/s" for r in found)
    lines = [
        f"## {HEADING}",
        "",
        machine_facts(f"pyspark {package_version('pyspark')}", java_version())
        + f". Load average (1 min) {load_before:.2f} before the run, {load_average():.2f} "
        "after it; the machine is shared.",
        "",
        *command_block(),
        "",
        f"{n:,} events of 100 bytes (JSON with `ts`), 10 keys, 2 segments; the Spark "
        "benchmark's read query over each source, 100,000 events per micro-batch, into a "
        f"noop sink (steady state here: {steady}). CPU seconds each process used while the "
        "query ran, and per event read:",
        "",
        markdown_table(rows),
        "",
        "A read task's Python, the same ranges read in one process (CPU, best of 3):",
        "",
        markdown_table(stage_rows),
    ]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="default 1000000")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the profile; 0 when it ran."""
    args = _parser().parse_args(argv)
    return run_and_record(SECTION, lambda: _run(args), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
