"""Flink in the event-time domain: from a writer's assertion to the job's watermark.

    .venv-flink/bin/python bench/run.py event_time_flink     # 45 s of writes
    .venv-flink/bin/python bench/event_time_flink_bench.py --seconds 30 --no-write

A store server subprocess; a writer asserting every ``--interval-ms`` (see
:mod:`_event_time_engines`); a PyFlink job (local mini-cluster, parallelism
2) reading the stream with ``with_time_domain(TimeDomain.EVENT_TIME)``, then
a keyed function that emits, for each reading, the wall time and Flink's
current watermark there. Latency of an assertion = the wall time Flink's
watermark at that function was first seen at or above it, minus the wall
time the assertion was acknowledged.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples

import pyflink  # noqa: E402,F401  (skipped where Flink is not installed)
from _event_time_engines import AssertingWriter, latency_rows, table  # noqa: E402
from _support import (  # noqa: E402
    StoreServerProcess,
    command_block,
    load_average,
    machine_facts,
    print_table,
    run_and_record,
)

from connector import StoreClient  # noqa: E402
from examples.job_output import Collected  # noqa: E402

__all__ = ["main"]

SECTION = "event_time_flink"
HEADING = "Flink in the event-time domain: from an assertion to the job's watermark"


def _run(args: argparse.Namespace) -> str:
    from pyflink.common import Configuration, Types
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.functions import KeyedProcessFunction

    from flink_adapter import FlinkTidemarkReader, TimeDomain

    class Stamp(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield json.dumps([time.time(), ctx.timer_service().current_watermark()])

    load_before = load_average()
    configuration = Configuration()
    configuration.set_string("parallelism.default", "2")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    with StoreServerProcess() as server, StoreClient(server.uri) as client:
        client.create_scope("lat")
        client.create_stream("lat", "asserted", segment_count=2)
        reader = (
            FlinkTidemarkReader.builder()
            .with_store(server.uri)
            .for_stream("lat/asserted")
            .with_deserialization_schema("json")
            .with_time_domain(TimeDomain.EVENT_TIME)
            .with_timestamp_assigner("ts")
            .build()
        )
        stamped = (
            reader.create_stream(env)
            .key_by(lambda row: row[0], key_type=Types.STRING())
            .process(Stamp(), output_type=Types.STRING())
        )
        with stamped.execute_and_collect() as results:
            output = Collected(results)
            began = time.time()
            writer = AssertingWriter(server.uri, "lat/asserted", args.interval_ms / 1000).start()
            try:
                time.sleep(args.seconds)
            finally:
                writer.stop()
            rows_seen = list(output.rows)
    reached = [(wall, mark) for wall, mark in rows_seen]  # Collected parsed each JSON row
    rows, latencies = latency_rows(writer.acks, reached, began)
    print_table(rows)
    return "\n".join(
        [
            f"## {HEADING}",
            "",
            f"Measured {time.strftime('%Y-%m-%d')} on {machine_facts()}. Load average (1 min) "
            f"{load_before:.2f} before, {load_average():.2f} after: other developers' test runs "
            "share the 2 cores.",
            "",
            f"A writer appends a reading to each of 2 segments and asserts its time every "
            f"{args.interval_ms} ms for {args.seconds} s; a PyFlink job (local mini-cluster, "
            "parallelism 2, the adapter's latency settings) reads the stream in the event-time "
            "domain into a keyed function stamping each reading with the wall time and Flink's "
            "watermark there. Latency = when Flink's watermark there was first seen at or "
            "above an assertion, minus the assertion's acknowledgement; after a 15 s warm-up. "
            "A watermark is seen with the next reading after it, so the figure includes up to "
            "one interval of waiting for a reading.",
            "",
            table(rows),
            "",
            *command_block(),
        ]
    ) + ("\n" if latencies else "\nNo assertion was reached after the warm-up.\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark and records its figures."""
    parser = argparse.ArgumentParser(prog="event_time_flink_bench")
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    return run_and_record(SECTION, lambda: _run(args), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
