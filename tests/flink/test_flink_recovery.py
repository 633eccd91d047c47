"""Exactly once through a task failure after a checkpoint, and through a split while running."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from examples.job_output import Collected
from flink_adapter import FlinkTidemarkReader, TimeDomain
from flink_adapter.python_mode import subtask_of
from tests.flink.conftest import PYTHON_MODES, environment

pytestmark = [pytest.mark.slow, pytest.mark.long]


#: What Flink's current watermark is before the first watermark reaches a task.
_NO_WATERMARK = -(2**63)


class _FailOnce(KeyedProcessFunction):
    """Fails the task once, at the first event marked ``fail``, the first time it is seen.

    Each row it passes on says which subtask and attempt saw it, and Flink's
    watermark in force there, so the test can follow the watermark across
    the restore.
    """

    def __init__(self, marker: str):
        self.marker = marker

    def open(self, runtime_context: RuntimeContext) -> None:
        subtask = subtask_of(runtime_context)  # PyFlink's own fails in thread mode
        self.subtask, self.attempt = subtask.index, subtask.attempt

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        event = json.loads(value[1])
        if event.get("fail") and not pathlib.Path(self.marker).exists():
            pathlib.Path(self.marker).write_text("failed once")
            msg = f"injected failure at event {event['n']}"
            raise RuntimeError(msg)
        yield json.dumps(
            {
                "event": event,
                "late": value[3],
                "segment": value[4],
                "subtask": self.subtask,
                "attempt": self.attempt,
                "watermark": ctx.timer_service().current_watermark(),
            }
        )


def _watermarks_across_the_restore(rows: list[dict[str, Any]]) -> None:
    """Per subtask, Flink's watermark never steps back across the restore.

    The rows are the exactly-once output: what the failed attempt passed
    before the checkpoint it restored from, then what later attempts passed.
    A restored task starts with no watermark (Flink does not checkpoint the
    Table runtime's watermark assigner) until the source's first watermark
    after the restore; that first watermark, and every later one, must be
    at or above the last one seen before the failure.
    """
    followed = 0
    for subtask in {row["subtask"] for row in rows}:
        seen = [r for r in rows if r["subtask"] == subtask and r["watermark"] > _NO_WATERMARK]
        before = [row["watermark"] for row in seen if row["attempt"] == 0]
        after = [row["watermark"] for row in seen if row["attempt"] > 0]
        assert before == sorted(before), f"subtask {subtask}: watermarks before the failure fell"
        assert after == sorted(after), f"subtask {subtask}: watermarks after the restore fell"
        if before and after:
            followed += 1
            assert after[0] >= max(before), (
                f"subtask {subtask}: the first watermark after the restore, {after[0]}, "
                f"steps back below {max(before)}"
            )
    assert followed, "a subtask saw watermarks both before the failure and after the restore"


def _last_checkpoint(folder: pathlib.Path) -> int:
    """The number of the newest completed checkpoint (older ones are deleted), or 0."""
    return max((int(p.parent.name[4:]) for p in folder.glob("*/chk-*/_metadata")), default=0)


@pytest.mark.storages("file", "jetstream")
@pytest.mark.parametrize("python_mode", PYTHON_MODES)
def test_a_failure_after_a_checkpoint_and_a_split_lose_and_repeat_nothing(
    start_store, clock, tmp_path: pathlib.Path, wait_until, python_mode: str
) -> None:
    server = start_store(max_watermark_lag_ms=300)
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("x")
    StreamManager(client).create_stream("x", "s", 2)
    checkpoints = tmp_path / "checkpoints"
    env = environment(
        python_mode,
        **{
            "execution.checkpointing.interval": "300 ms",
            "execution.checkpointing.dir": checkpoints.as_uri(),
            "execution.checkpointing.storage": "filesystem",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "3",
            "restart-strategy.fixed-delay.delay": "200 ms",
        },
    )
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
    out = (
        reader.create_stream(env)
        .key_by(lambda row: row[0], key_type=Types.STRING())
        .process(_FailOnce(str(marker)), output_type=Types.STRING())
    )
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

    def watermarked(rows: list[dict[str, Any]], restored: bool = False) -> set[int]:
        """The subtasks that passed rows under a watermark (after the restore only, or not)."""
        return {
            row["subtask"]
            for row in rows
            if row["watermark"] > _NO_WATERMARK and (row["attempt"] > 0) == restored
        }

    def write_until_watermarked(writer: EventWriter[Any], restored: bool = False) -> None:
        """Writes on until rows come out under a watermark, which follows the idle ticks.

        After the restore, until a subtask that did so before the failure does so again.
        """
        wanted = watermarked(output.rows) if restored else None
        for _ in range(40):
            write(writer, 3)
            count = len(written)
            output.wait_for(lambda rows, count=count: len(rows) >= count, f"{count} events")
            found = watermarked(output.rows, restored)
            if found and (wanted is None or found & wanted):
                return
        msg = "no row came out under a watermark" + (" after the restore" if restored else "")
        raise AssertionError(msg)

    with out.execute_and_collect() as results:
        output = Collected(results)
        with EventWriter(client, "x/s", JsonSerializer()) as writer:
            write(writer, 20)
            output.wait_for(lambda rows: len(rows) >= 20, "the first 20 events")
            write_until_watermarked(writer)
            seen = _last_checkpoint(checkpoints)
            wait_until(
                lambda: _last_checkpoint(checkpoints) > seen,
                timeout=60,
                what="a checkpoint after the first watermarked events",
            )
            write(writer, 20, fail_first=True)  # fails the task once; the job restores
            wait_until(marker.exists, timeout=60, what="the injected failure")
            client.scale_stream("x", "s", [0], split_count=2)  # a split while the job runs
            write(writer, 20)
            write_until_watermarked(writer, restored=True)
        total = len(written)
        output.wait_for(
            lambda rows: len(rows) >= total, f"all {total} events after the restore", 120
        )
        rows = list(output.rows)
    events = [row["event"] for row in rows]
    assert sorted(e["n"] for e in events) == list(range(len(written))), "each event exactly once"
    assert not any(row["late"] for row in rows), "no replayed event is flagged late"
    for key in ("k0", "k1", "k2"):
        mine = [e["n"] for e in events if e["key"] == key]
        assert mine == sorted(mine), key
    assert any(row["segment"] not in ("x/s/0", "x/s/1") for row in rows), "successors were read"
    assert any(row["attempt"] > 0 for row in rows), "the job restored"
    _watermarks_across_the_restore(rows)
    client.close()
