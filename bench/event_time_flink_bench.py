"""Flink in the event-time domain: from a writer's assertion to the job's watermark.

    .venv-flink/bin/python -m bench.run event_time_flink     # 45 s of writes
    .venv-flink/bin/python -m bench.run event_time_flink --seconds 30 --no-write

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
import time
from typing import Any

from bench._event_time_engines import AssertingWriter, EngineLatencies, latencies
from bench._support import StoreServerProcess
from connector import StoreClient
from examples.job_output import Collected

__all__ = ["measure", "options"]


def measure(args: argparse.Namespace) -> EngineLatencies:
    """A PyFlink job in the event-time domain while a writer asserts; the latencies."""
    from pyflink.common import Configuration, Types
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.functions import KeyedProcessFunction

    from flink_adapter import FlinkTidemarkReader, TimeDomain

    class Stamp(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield json.dumps([time.time(), ctx.timer_service().current_watermark()])

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
            .with_python_execution_mode("thread")  # as recorded in RESULTS.md
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
    return EngineLatencies(args.interval_ms, args.seconds, latencies(writer.acks, reached, began))


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(prog="event_time_flink_bench")
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--interval-ms", type=int, default=100)
    return parser
