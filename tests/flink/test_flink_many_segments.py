"""A job over 1,024 idle segments costs the store what changes, not what exists.

Counted with the server's request counters (real server over gRPC): an
idle epoch of the coordinator is one small ``DescribeTails`` call, and its
pending count none; on a PyFlink mini-cluster, a job's idle epochs ask
nothing else, and an epoch with one new event a few calls more. Synthetic
clock, no idle advancer: nothing changes unless a test changes it. And counted
in the segment cursors the coordinator makes: none in an idle epoch, one for
the segment an event moved, each once when a tick moved them all.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any

import pytest
from pyflink.common import Types
from pyflink.datastream.functions import ProcessFunction

from connector import StoreClient
from connector.clock import ManualClock
from connector.reader.progress_watch import ProgressWatch
from connector.reader.source import SourcePlanner
from examples.job_output import Collected
from flink_adapter import FlinkTidemarkReader, TimeDomain
from flink_adapter.epochs import EpochEnd
from flink_adapter.functions import EpochCoordinator
from flink_adapter.store_thread import StoreThread
from tests.conftest import WIDE, wait_until
from tests.flink.holders import Value
from tests.probes import CallCounter, CursorCount

_log = logging.getLogger(__name__)


def _reader(uri: str, stream: str) -> FlinkTidemarkReader:
    return (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream(stream)
        .with_deserialization_schema("string")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_parallelism(2)
        .build()
    )


def _coordinator(reader: FlinkTidemarkReader, client: StoreClient) -> EpochCoordinator:
    """The job's coordinator, opened on ``client`` with plain holders for its state and metrics."""
    coordinator = EpochCoordinator(reader.settings)
    coordinator._frontier, coordinator._epoch = Value(), Value()  # noqa: SLF001
    coordinator._planner = SourcePlanner(client, reader.settings.spec)  # noqa: SLF001
    for metric in ("_group_watermark", "_lag_ms", "_watermark_lag", "_pending_records"):
        setattr(coordinator, metric, Value())
    coordinator._figures = defaultdict(Value)  # noqa: SLF001
    spec = reader.settings.spec
    coordinator._watch = ProgressWatch("the test's job", spec.stream_names, _log)  # noqa: SLF001
    coordinator._store = StoreThread("many-segments")  # noqa: SLF001
    coordinator._pending_counted_at = 0  # noqa: SLF001
    return coordinator


def test_an_idle_epoch_costs_one_small_call_and_its_pending_count_none(
    wide: tuple[Any, StoreClient, str],
) -> None:
    server, client, stream = wide
    coordinator = _coordinator(_reader(server.uri, stream), client)
    try:
        list(coordinator._plan_next_epoch())  # noqa: SLF001 - the first: a complete description
        counted = CallCounter(server)
        for _ in range(5):
            coordinator._pending_counted_at = 0  # noqa: SLF001 - the pending count is due
            records = list(coordinator._plan_next_epoch())  # noqa: SLF001
            assert counted.since() == {"all": 1, "DescribeTails": 1}
            assert len(records) == 1  # the epoch's end, no task
            assert coordinator._pending_records.value() == 0  # noqa: SLF001
        client.append(f"{stream}/700", "w", 0, [b"one"])
        counted.since()
        coordinator._pending_counted_at = 0  # noqa: SLF001
        records = list(coordinator._plan_next_epoch())  # noqa: SLF001
        assert len(records) == 2  # one task, then the epoch's end
        # One description, the budget's plans of the segment with data in one call, and the
        # stream's lineage for the task, described once for the planner's life.
        assert counted.since() == {
            "all": 3,
            "DescribeTails": 1,
            "PlanReads": 1,
            "DescribeStream": 1,
        }
        assert coordinator._pending_records.value() == 0  # noqa: SLF001
    finally:
        coordinator._store.close()  # noqa: SLF001


def test_an_epoch_touches_only_the_segments_that_moved(
    wide: tuple[Any, StoreClient, str], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted in segment cursors made: none while idle, one per segment moved, not per segment.

    Nor is the frontier in state written again while nothing moved.
    """
    server, client, stream = wide
    coordinator = _coordinator(_reader(server.uri, stream), client)
    cursors = CursorCount(monkeypatch)
    try:
        list(coordinator._plan_next_epoch())  # noqa: SLF001 - the first: a complete description
        saved = coordinator._frontier.value()  # noqa: SLF001
        cursors.since()
        for _ in range(5):
            coordinator._pending_counted_at = 0  # noqa: SLF001 - the pending count is due
            assert len(list(coordinator._plan_next_epoch())) == 1  # noqa: SLF001 - its end
            assert cursors.since() == 0
        assert coordinator._frontier.value() is saved  # noqa: SLF001 - not written again

        clock.advance(server.store.config.max_watermark_lag_ms + 1)
        assert server.store.advance_idle_segments() == WIDE
        coordinator._pending_counted_at = 0  # noqa: SLF001
        [end] = list(coordinator._plan_next_epoch())  # noqa: SLF001
        assert isinstance(end, EpochEnd) and end.watermark is not None  # it rose
        assert cursors.since() <= WIDE  # every segment moved: each once

        client.append(f"{stream}/700", "w", 0, [b"one"])
        coordinator._pending_counted_at = 0  # noqa: SLF001
        task, _ = list(coordinator._plan_next_epoch())  # noqa: SLF001
        assert [r.segment for r in task.ranges] == [f"{stream}/700"]
        assert cursors.since() <= 2  # the segment that moved
    finally:
        coordinator._store.close()  # noqa: SLF001


class _Json(ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield json.dumps({"event": value[1], "segment": value[4]})


@pytest.mark.slow
def test_a_jobs_idle_epochs_ask_one_small_call_each_and_nothing_per_segment(
    wide: tuple[Any, StoreClient, str], flink_env: Any
) -> None:
    server, client, stream = wide
    rows = _reader(server.uri, stream).create_stream(flink_env)
    started = CallCounter(server)
    with rows.process(_Json(), output_type=Types.STRING()).execute_and_collect() as results:
        output = Collected(results)
        wait_until(
            lambda: started.since().get("DescribeTails"), timeout=120, what="the first epoch"
        )
        counted = CallCounter(server)
        epochs = counted.wait_for("DescribeTails", 20, timeout=60, what="20 idle epochs")
        assert set(epochs) == {"all", "DescribeTails"}, epochs  # nothing else, no segment

        client.append(f"{stream}/700", "w", 0, [b"one"])
        counted.since()
        output.wait_for(lambda got: got, "the event", timeout=60)
        batch = counted.since()
    assert output.rows == [{"event": "one", "segment": f"{stream}/700"}]
    # The epoch's plan, its task's read: a few calls, whatever the segments.
    per_segment = {m: n for m, n in batch.items() if m not in ("all", "DescribeTails")}
    assert sum(per_segment.values()) <= 10, batch
    assert batch.get("GetSegmentInfo", 0) == 0 and batch.get("PlanRead", 0) == 0, batch
