"""A Flink job as a stage of a pipeline: ``tidemarkctl pipeline`` shows its watermarks.

A real PyFlink mini-cluster copies one stream into another in the event-time
domain, asserting its watermark there, having named the stream it reads
(``with_stage_inputs``). While it runs, ``tidemarkctl pipeline`` on a real
store server (synthetic clock) shows the job as a stage: its input
watermark, the event time the input's writer asserts; its output
watermark, what the job asserts; the job's watermark trails its input's.
"""

from __future__ import annotations

from typing import Any

import pytest

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from flink_adapter import FlinkTidemarkReader, FlinkTidemarkWriter, TimeDomain
from flink_adapter.python_mode import THREAD
from tests.cli import ok_json
from tests.conftest import CLOCK_START_MS
from tests.flink.conftest import environment

pytestmark = pytest.mark.slow

T = CLOCK_START_MS


def _stage(uri: str) -> dict[str, Any] | None:
    """The job's stage as ``tidemarkctl pipeline f --json`` shows it, once it asserts."""
    stages = ok_json(uri, "pipeline", "f")["stages"]
    return stages[0] if stages and stages[0]["output_watermark"] is not None else None


def test_a_running_job_shows_as_a_stage_with_its_input_and_output_watermarks(
    start_store, wait_until
) -> None:
    server = start_store()
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("f")
    client.create_stream("f", "raw", 1)
    client.create_stream("f", "out", 1)
    sensor = EventWriter(client, "f/raw", JsonSerializer(), writer_id="sensor")
    for n in range(5):
        sensor.write_event({"n": n, "t": T + 100 * n}, routing_key="k")
    sensor.note_time(T + 1_000)  # open: its assertion stays the input's event time
    # A row a bundle: Flink hands a Python function the watermark between bundles.
    env = environment(THREAD, **{"python.fn-execution.bundle.size": "1"})
    env.set_parallelism(1)
    env.get_config().set_auto_watermark_interval(20)
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("f/raw", start="earliest")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.EVENT_TIME)
        .with_timestamp_assigner("t")
        .with_parallelism(1)
        .build()
    )
    sink = (
        FlinkTidemarkWriter.builder()
        .with_store(server.uri)
        .for_stream("f/out")
        .with_serialization_schema("string")
        .with_event_field(1)
        .with_routing_key_field(0)
        .with_watermark_assertion()
        .with_writer_id_prefix("copy")
        .with_stage_inputs(*reader.settings.spec.stream_names)
        .build()
    )
    sink.sink(reader.create_stream(env))
    job = env.execute_async("copy as a stage")
    try:
        stage = wait_until(
            lambda: _stage(server.uri),
            timeout=90,
            interval=0.2,
            what="the job's stage to show its assertion",
        )
    finally:
        job.cancel().result()
    assert (stage["stage"], stage["engine"], stage["inputs"], stage["output"]) == (
        "copy@out",
        "flink",
        ["f/raw"],
        "f/out",
    )
    assert (stage["input_watermark"], stage["input_from"]) == (T + 1_000, "streams")
    # The job's watermark has passed some of the rows and not the input's assertion.
    assert T <= stage["output_watermark"] <= T + 1_000
    assert stage["event_time_latency_ms"] == T + 1_000 - stage["output_watermark"]
    sensor.close()
    client.close()
