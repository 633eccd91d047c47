"""The Flink sink: a job copies one stream into another and asserts its watermark there.

At least once through a restore (see ``flink_adapter/sink.py`` for why not
exactly once): every event reaches the target, some possibly twice after the
restore. Every subtask of the sink joins the target's writers, also one that
has no rows, and after the restore the same writers (new incarnations of
their ids) follow the job's watermark again. A bounded job's writers are
marked idle as it ends; a cancelled job's leave by the store's idle timeout.
"""

from __future__ import annotations

import json
import pathlib
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import MapFunction

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.errors import InvalidArgumentError
from connector.framing import iter_frames
from connector.stages import read_stages
from flink_adapter import FlinkTidemarkReader, FlinkTidemarkWriter, TimeDomain

pytestmark = [pytest.mark.slow, pytest.mark.long]

LAG_MS = 1_000


class _FailOnce(MapFunction):
    """Fails its task once, at the first event marked ``fail``; passes every row on."""

    def __init__(self, marker: str):
        self.marker = marker

    def map(self, value: Any) -> Any:
        if json.loads(value[1]).get("fail") and not pathlib.Path(self.marker).exists():
            pathlib.Path(self.marker).write_text("failed once")
            msg = "injected failure"
            raise RuntimeError(msg)
        return value


def _stored(client: StoreClient, stream: str) -> list[tuple[str, dict[str, Any]]]:
    """Every event of ``stream`` as (segment, event), each segment in order."""
    scope, name = stream.split("/")
    found = []
    for segment in client.describe_stream(scope, name).segments:
        end = client.segment_info(segment.segment).write_offset
        offset = 0
        while offset < end:
            read = client.read(segment.segment, offset)
            found += [(segment.segment, json.loads(f.payload)) for f in iter_frames(read.data)]
            offset = read.next_offset
    return found


def _last_checkpoint(folder: pathlib.Path) -> int:
    return max((int(p.parent.name[4:]) for p in folder.glob("*/chk-*/_metadata")), default=0)


def test_the_builder_refuses_a_bad_option_naming_it() -> None:
    builder = FlinkTidemarkWriter.builder().with_store("tidemark://127.0.0.1:1")
    with pytest.raises(InvalidArgumentError, match="for_stream"):
        builder.build()
    with pytest.raises(InvalidArgumentError, match="with_serialization_schema"):
        builder.for_stream("x/t").with_serialization_schema("avro").build()
    with pytest.raises(InvalidArgumentError, match="with_stage_inputs: invalid stream 'raw'"):
        FlinkTidemarkWriter.builder().with_store("tidemark://h:1").for_stream(
            "x/t"
        ).with_stage_inputs("raw").build()
    with pytest.raises(InvalidArgumentError, match="with_routing_key_field"):
        FlinkTidemarkWriter.builder().with_store("tidemark://h:1").for_stream(
            "x/t"
        ).with_routing_key_field(1.5).build()  # type: ignore[arg-type]


def _joined(client: StoreClient) -> Callable[[], set[str] | None]:
    """The copy's writers once both sink subtasks assert on its segment 0; None before.

    Ticks come every second, so a subtask with no rows asserts too.
    """

    def writers() -> set[str] | None:
        found = {w.writer_id for w in client.segment_info("x/copy/0").writers}
        return found if found == {"copy-0", "copy-1"} else None

    return writers


def test_a_job_copies_a_stream_asserting_its_watermark_at_least_once_through_a_restore(
    start_store, clock, tmp_path: pathlib.Path, wait_until
) -> None:
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("x")
    client.create_stream("x", "source", 2)
    client.create_stream("x", "copy", 2)
    checkpoints = tmp_path / "checkpoints"
    configuration = Configuration()
    configuration.set_string("parallelism.default", "2")
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
        .for_stream("x/source")
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(LAG_MS)
        .with_parallelism(2)
        .build()
    )
    sink = (
        FlinkTidemarkWriter.builder()
        .with_store(server.uri)
        .for_stream("x/copy")
        .with_serialization_schema("string")
        .with_event_field(1)
        .with_routing_key_field(0)
        .with_watermark_assertion()
        .with_writer_id_prefix("copy")
        .build()
    )
    marker = tmp_path / "failed"
    rows = reader.create_stream(env).map(_FailOnce(str(marker)), output_type=reader.output_type())
    sink.sink(rows)
    written: list[dict[str, Any]] = []

    def write(writer: EventWriter[Any], count: int, fail_first: bool = False) -> None:
        for number in range(count):
            reading = {"key": f"k{len(written) % 3}", "n": len(written), "ts": clock.now_ms()}
            if fail_first and number == 0:
                reading["fail"] = True
            writer.write_event(reading, routing_key=reading["key"])
            written.append(reading)
            clock.advance(5)
        writer.flush()
        clock.advance(400)
        server.store.advance_idle_segments()

    def copied() -> Counter[int]:
        return Counter(event["n"] for _, event in _stored(client, "x/copy"))

    def asserted() -> int | None:
        marks = [client.segment_info(f"x/copy/{n}").event_time_watermark for n in (0, 1)]
        return None if None in marks else min(marks)

    def caught_up(last: int) -> bool:
        # The job's watermark is the source's group watermark less the lag.
        return set(copied()) == set(range(len(written))) and (asserted() or 0) >= last - LAG_MS

    def copy_catches_up(writer: EventWriter[Any], what: str) -> int:
        """Writes on until every event is copied and the copy's watermark follows the last one.

        The watermark follows the store's idle ticks (the clock moves with each write).
        """
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            write(writer, 3)
            last = written[-1]["ts"]
            try:
                wait_until(lambda last=last: caught_up(last), timeout=3, what=what)
            except AssertionError:
                continue
            return asserted() or 0
        msg = f"the copy did not catch up {what}: {copied()!r}, watermark {asserted()!r}"
        raise AssertionError(msg)

    job = env.execute_async("copy with watermarks")
    try:
        with EventWriter(client, "x/source", JsonSerializer()) as writer:
            write(writer, 20)
            before = copy_catches_up(writer, "before the failure")
            writers_before = wait_until(
                _joined(client), timeout=30, what="every subtask of the sink to join, rows or not"
            )
            seen = _last_checkpoint(checkpoints)
            wait_until(
                lambda: _last_checkpoint(checkpoints) > seen, timeout=60, what="a checkpoint"
            )
            write(writer, 10, fail_first=True)
            wait_until(marker.exists, timeout=60, what="the injected failure")
            after = copy_catches_up(writer, "after the restore")
            # A restored subtask joins again with its first assertion, which may come after
            # the copy caught up (the other subtask's rows and marks moved it).
            writers_after = wait_until(
                _joined(client), timeout=30, what="every subtask of the sink to join again"
            )
    finally:
        job.cancel().result()
    assert after > before, "the watermark follows the job again after the restore"
    assert writers_after == writers_before
    counts = copied()
    assert set(counts) == set(range(len(written))), "every event copied at least once"
    # Per key, each run copied its events in order.
    for key in ("k0", "k1", "k2"):
        numbers = [e["n"] for _, e in _stored(client, "x/copy") if e["key"] == key]
        first_copies = list(dict.fromkeys(numbers))
        assert first_copies == sorted(first_copies), key
    # A cancelled job's functions may or may not be closed (which marks their writers
    # idle): those left leave by the store's idle timeout.
    clock.advance(server.store.config.writer_idle_timeout_ms + 1_000)
    server.store.mark_silent_writers_idle()
    assert client.segment_info("x/copy/0").writers == ()
    client.close()


class _Slowly(MapFunction):
    """Passes each row on after a pause, so Flink's watermark rises between rows."""

    def map(self, value: Any) -> Any:
        time.sleep(0.05)
        return value


class _Field(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return json.loads(value[1])["ts"]


def test_a_bounded_job_asserts_its_watermark_as_it_rises_and_its_writers_idle_at_the_end(
    start_store, clock
) -> None:
    server = start_store()
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("x")
    client.create_stream("x", "copy", 2)
    configuration = Configuration()
    configuration.set_string("parallelism.default", "2")
    # A row a bundle: Flink hands a Python function the watermark between bundles.
    configuration.set_string("python.fn-execution.bundle.size", "1")
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.get_config().set_auto_watermark_interval(20)
    start = 1_700_000_000_000
    readings = [(f"k{n % 4}", json.dumps({"n": n, "ts": start + 100 * n})) for n in range(40)]
    rows = (
        env.from_collection(readings, type_info=Types.TUPLE([Types.STRING(), Types.STRING()]))
        .map(_Slowly(), output_type=Types.TUPLE([Types.STRING(), Types.STRING()]))
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Field())
        )
    )
    sink = (
        FlinkTidemarkWriter.builder()
        .with_store(server.uri)
        .for_stream("x/copy")
        .with_serialization_schema("string")
        .with_event_field(1)
        .with_routing_key_field(0)
        .with_watermark_assertion()
        .with_stage_inputs("x/readings")
        .build()
    )
    sink.sink(rows, bounded=True)
    [stage] = read_stages(client, "x")
    assert (stage.name, stage.inputs, stage.output, stage.writer) == (
        "flink@copy",
        ("x/readings",),
        "x/copy",
        "flink",
    ), "the job recorded its stage as it was set up"
    env.execute("bounded copy")
    stored = _stored(client, "x/copy")
    assert sorted(e["n"] for _, e in stored) == list(range(40)), "each event once"
    asserted = []
    for segment in ("x/copy/0", "x/copy/1"):
        end, offset = client.segment_info(segment).write_offset, 0
        while offset < end:
            read = client.read(segment, offset, max_bytes=1)
            event = json.loads(next(iter_frames(read.data)).payload)
            if read.event_time_watermark is not None:
                asserted.append((read.event_time_watermark, event["ts"]))
            offset = read.next_offset
        assert client.segment_info(segment).writers == (), "the ended job's writers are idle"
    assert asserted, "the job asserted its watermark while it ran"
    # Flink's watermark trails the rows (monotonous: the last timestamp less 1 ms).
    assert all(mark < start + 100 * 40 for mark, _ in asserted)
    client.close()
