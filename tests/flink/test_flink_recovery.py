"""Exactly once through a task failure after a checkpoint, and through a split while running."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import MapFunction

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from examples.job_output import Collected
from flink_adapter import FlinkTidemarkReader, TimeDomain

pytestmark = pytest.mark.slow


class _FailOnce(MapFunction):
    """Fails the task once, at event ``n == at``, the first time it is seen."""

    def __init__(self, marker: str, at: int):
        self.marker = marker
        self.at = at

    def map(self, value: Any) -> str:
        event = json.loads(value[1])
        if event["n"] == self.at and not pathlib.Path(self.marker).exists():
            pathlib.Path(self.marker).write_text("failed once")
            msg = f"injected failure at event {self.at}"
            raise RuntimeError(msg)
        return json.dumps({"event": event, "late": value[3], "segment": value[4]})


def _last_checkpoint(folder: pathlib.Path) -> int:
    """The number of the newest completed checkpoint (older ones are deleted), or 0."""
    return max((int(p.parent.name[4:]) for p in folder.glob("*/chk-*/_metadata")), default=0)


def test_a_failure_after_a_checkpoint_and_a_split_lose_and_repeat_nothing(
    start_store, clock, tmp_path: pathlib.Path, wait_until
) -> None:
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("x")
    StreamManager(client).create_stream("x", "s", 2)
    checkpoints = tmp_path / "checkpoints"
    configuration = Configuration()
    configuration.set_string("parallelism.default", "2")
    configuration.set_string("execution.checkpointing.interval", "300 ms")
    configuration.set_string("execution.checkpointing.dir", checkpoints.as_uri())
    configuration.set_string("execution.checkpointing.storage", "filesystem")
    configuration.set_string("restart-strategy.type", "fixed-delay")
    configuration.set_string("restart-strategy.fixed-delay.attempts", "3")
    configuration.set_string("restart-strategy.fixed-delay.delay", "200 ms")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.enable_checkpointing(300)
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("x/s")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(1_000)
        .with_parallelism(2)
        .build()
    )
    marker = tmp_path / "failed"
    out = reader.create_stream(env).map(_FailOnce(str(marker), at=30), output_type=Types.STRING())
    written: list[dict[str, Any]] = []

    def write(writer: EventWriter[Any], count: int) -> None:
        for _ in range(count):
            reading = {"key": f"k{len(written) % 3}", "n": len(written), "ts": clock.now_ms()}
            writer.write_event(reading, routing_key=reading["key"])
            written.append(reading)
            clock.advance(5)
        writer.flush()
        clock.advance(400)
        server.store.advance_idle_segments()

    with out.execute_and_collect() as results:
        output = Collected(results)
        with EventWriter(client, "x/s", JsonSerializer()) as writer:
            write(writer, 20)
            output.wait_for(lambda rows: len(rows) >= 20, "the first 20 events")
            seen = _last_checkpoint(checkpoints)
            wait_until(
                lambda: _last_checkpoint(checkpoints) > seen,
                timeout=60,
                what="a checkpoint after the first events",
            )
            write(writer, 20)  # event 30 fails the task once; the job restores
            wait_until(marker.exists, timeout=60, what="the injected failure")
            client.scale_stream("x", "s", [0], split_count=2)  # a split while the job runs
            write(writer, 20)
        output.wait_for(lambda rows: len(rows) >= 60, "all 60 events after the restore", 120)
        rows = list(output.rows)
    events = [row["event"] for row in rows]
    assert sorted(e["n"] for e in events) == list(range(60)), "each event exactly once"
    assert not any(row["late"] for row in rows), "no replayed event is flagged late"
    for key in ("k0", "k1", "k2"):
        mine = [e["n"] for e in events if e["key"] == key]
        assert mine == sorted(mine), key
    assert any(row["segment"] not in ("x/s/0", "x/s/1") for row in rows), "successors were read"
    client.close()
