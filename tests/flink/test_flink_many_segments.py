"""A job over 1,024 idle segments costs the store what changes, not what exists.

Counted with the server's request counters (real server over gRPC): an
idle epoch of the coordinator is one small ``DescribeTails`` call, and its
pending count none; the epoch after an idle one parks that call on the
server, off the timer, until a change; on a PyFlink mini-cluster, a job's
idle epochs park one such call and ask nothing else, and an append ends
the wait with a few calls more. Synthetic
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
from flink_adapter.epoch_plans import EpochPlans
from flink_adapter.epochs import EpochEnd
from flink_adapter.functions import EpochCoordinator
from flink_adapter.store_thread import StoreThread
from tests.conftest import WIDE, wait_until
from tests.flink.holders import Value
from tests.probes import CallCounter, CursorCount

_log = logging.getLogger(__name__)


def _reader(uri: str, stream: str, idle_wait_ms: int = 0) -> FlinkTidemarkReader:
    """The job's source; by default its epochs never wait on the store: each is counted alone."""
    return (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream(stream)
        .with_deserialization_schema("string")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_parallelism(2)
        .with_idle_wait(idle_wait_ms)
        .build()
    )


def _parked(server: Any) -> float | None:
    """How many DescribeTails calls wait on ``server`` now."""
    return server.metrics.registry.get_sample_value(
        "tidemark_parked_calls", {"method": "DescribeTails"}
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
    coordinator._plans = EpochPlans(  # noqa: SLF001
        coordinator._store,  # noqa: SLF001
        coordinator._planner,  # noqa: SLF001
        reader.settings.idle_wait_ms,
    )
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


def test_an_epoch_after_an_idle_one_waits_on_the_store_off_the_timer_until_a_change(
    wide: tuple[Any, StoreClient, str],
) -> None:
    """``with_idle_wait``: after an idle epoch, the next one's description parks on the server.

    The timer that starts it returns at once, emitting nothing (Flink's
    mailbox stays free for barriers and a cancel), and so do the timers
    while it waits, asking the store nothing; the frontier in state stays
    the one it started from (what a checkpoint then holds). An event ends
    the wait: the next timer emits its task, and the epoch after plans at
    once, the one after that waits again.
    """
    server, client, stream = wide
    reader = _reader(server.uri, stream, idle_wait_ms=30_000)  # only a change ends it in time
    coordinator = _coordinator(reader, client)
    plans = coordinator._plans  # noqa: SLF001
    try:
        for _ in range(3):  # the first epochs plan at once, until one found nothing new
            if not list(coordinator._plan_next_epoch()):  # noqa: SLF001
                break
        assert plans.parked
        saved = coordinator._frontier.value()  # noqa: SLF001
        wait_until(lambda: _parked(server) == 1, what="the epoch's DescribeTails parked")
        counted = CallCounter(server)
        for _ in range(5):  # the timers while it waits: nothing out, nothing asked
            assert list(coordinator._plan_next_epoch()) == []  # noqa: SLF001
        assert counted.since() == {}
        assert coordinator._frontier.value() is saved  # noqa: SLF001

        client.append(f"{stream}/700", "w", 0, [b"one"])
        wait_until(lambda: not plans.parked, timeout=10, what="the event ending the 30 s wait")
        task, end = list(coordinator._plan_next_epoch())  # noqa: SLF001
        assert [r.segment for r in task.ranges] == [f"{stream}/700"]
        assert isinstance(end, EpochEnd)
        assert counted.since()["DescribeTails"] == 1  # the wait's one call, answered
        assert len(list(coordinator._plan_next_epoch())) == 1  # noqa: SLF001 - at once: its end
        assert list(coordinator._plan_next_epoch()) == []  # noqa: SLF001 - idle: waits again
        assert plans.parked
    finally:
        coordinator._store.close(client)  # noqa: SLF001 - ends the call in flight


class _Json(ProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield json.dumps({"event": value[1], "segment": value[4]})


@pytest.mark.slow
def test_a_jobs_idle_epochs_park_one_small_call_that_an_append_ends(
    wide: tuple[Any, StoreClient, str], flink_env: Any
) -> None:
    """A job's idle epochs wait on the store in one small call each; an event ends the wait.

    With an idle wait far longer than the test's bounds, the job's
    DescribeTails parks on the server and nothing else is asked; an
    append ends the parked call at once (not after its 30 s) and reaches
    the job's output in a few calls, none per segment; idle again, the
    job parks its next description.
    """
    server, client, stream = wide
    rows = _reader(server.uri, stream, idle_wait_ms=30_000).create_stream(flink_env)
    with rows.process(_Json(), output_type=Types.STRING()).execute_and_collect() as results:
        output = Collected(results)
        wait_until(lambda: _parked(server) == 1, timeout=120, what="an idle epoch parked")
        counted = CallCounter(server)
        client.append(f"{stream}/700", "w", 0, [b"one"])
        woken = counted.wait_for("DescribeTails", 1, timeout=10, what="the append ending the wait")
        output.wait_for(lambda got: got, "the event", timeout=60)
        wait_until(lambda: _parked(server) == 1, timeout=30, what="idle again, parked again")
        after = counted.since()
    batch = {m: woken.get(m, 0) + after.get(m, 0) for m in woken.keys() | after.keys()}
    assert output.rows == [{"event": "one", "segment": f"{stream}/700"}]
    # The wait's answer, the epoch's plan, its task's read: a few calls, whatever the segments.
    per_segment = {m: n for m, n in batch.items() if m not in ("all", "DescribeTails")}
    assert sum(per_segment.values()) <= 10, batch
    assert batch.get("GetSegmentInfo", 0) == 0 and batch.get("PlanRead", 0) == 0, batch
