"""The source's Flink functions: the coordinator and the reader subtasks.

- :class:`EpochCoordinator` runs at parallelism 1, keyed by a constant, so
  its frontier lives in keyed ``ValueState`` and is checkpointed with the job.
  An epoch starts every ``epoch_interval_ms`` on a processing-time timer (the
  ticks only start it and keep the job unbounded: Flink's ``datagen`` emits a
  second's rows in one burst, so epochs paced by ticks would come once a
  second): it plans with the reader core's
  :meth:`~connector.reader.source.SourcePlanner.step` and emits the epoch's
  read tasks, then its end (:mod:`flink_adapter.epochs`). An epoch over idle
  segments costs the store one small call, however many there are, and the
  pending count (once a second) counts on the tails the epoch described.
  An epoch after one that found nothing new waits on the store for a
  change, at most ``idle_wait_ms``, on the store thread and never in the
  timer (:mod:`flink_adapter.epoch_plans`: why), so an idle job asks the
  store a few times a second and checkpoints never wait for it.
  Nor does it look at the segments: the frontier in state is read once
  (:class:`~connector.reader.source.FrontierForms`) and an epoch in which
  no tail moved plans nothing, writes no new frontier and counts the same
  figures again; one in which only watermarks moved (idle ticks) updates
  the segments that moved (:class:`~connector.reader.source.SourcePlanner`).
  A bounded read plans once, on its one tick.
- :class:`TaskReader` runs at the source's parallelism behind a broadcast:
  every subtask sees every record, reads the tasks whose lane falls to it
  (with the core's :func:`~connector.reader.source.read_columns`) and, on
  each epoch's end, emits one watermark row, also when it had nothing to
  read. So Flink's watermark, the minimum over subtasks, is the epoch's
  once all of them have read their share, whatever the parallelism.

Both make their store calls on a thread of their own
(:mod:`flink_adapter.store_thread`: why), and a reader reads its tasks
there ahead of handing their rows to Flink: a task's rows go out at the
latest with its epoch's end, before that end's watermark row. Closing a
function (a cancelled or failing job) ends its store call in flight at
once, and the call it was in emits nothing more.

Both keep no state but the coordinator's frontier: after a restore the
coordinator plans again from its checkpointed frontier, and Flink's
checkpoint barriers (behind each epoch's end on every channel, since the
coordinator emits an epoch in one timer call) make each event reach the
sinks once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

from pyflink.common import Row  # noqa: TC002 - the rows these functions yield
from pyflink.datastream.functions import FlatMapFunction, KeyedProcessFunction, RuntimeContext

from connector.client import StoreClient  # noqa: TC001 - a reader's client, held
from connector.reader.late_count import LateCount
from connector.reader.progress_watch import ProgressWatch
from connector.reader.source import (
    EventColumns,
    Frontier,
    FrontierForms,
    ReadTask,
    SourcePlanner,
    read_columns,
)
from flink_adapter.coordinator_state import CoordinatorState
from flink_adapter.epoch_plans import EpochPlans
from flink_adapter.epochs import EpochEnd, epoch_records
from flink_adapter.metrics import Value
from flink_adapter.python_mode import THREAD, report_mode, subtask_of
from flink_adapter.reading import batch_rows, watermark_row
from flink_adapter.settings import SourceSettings
from flink_adapter.store_thread import Pending, StoreThread, StoreThreadClosed

__all__ = ["EpochCoordinator", "TaskReader"]

#: How often the ticks come (Flink's datagen at one row a second).
_TICK_PERIOD_MS = 1_000
#: How often the coordinator asks the store how many events it has not planned, ms.
_PENDING_EVERY_MS = 1_000


_log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class EpochCoordinator(KeyedProcessFunction):
    """Plans an epoch every interval from the frontier in keyed state; emits tasks, then the end.

    The next epoch's time is keyed state too, and its timer is Flink's, so
    both are checkpointed together: a restored coordinator goes on at once.
    """

    def __init__(self, settings: SourceSettings):
        self.settings = settings
        self._planner: SourcePlanner | None = None
        self._store: StoreThread | None = None
        self._forms = FrontierForms()  # the frontier in state is read once, not every epoch

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        mode = report_mode(runtime_context, self.settings.coordinator_name, self.settings.mode)
        state = CoordinatorState(runtime_context, mode)
        self._frontier, self._epoch = state.frontier, state.epoch
        self._next_epoch_at = state.next_epoch_at
        spec = self.settings.spec
        self._store = StoreThread("tidemark-coordinator-store")
        self._planner = self._store.call(lambda: SourcePlanner(spec.client(), spec))
        self._plans = EpochPlans(self._store, self._planner, self.settings.idle_wait_ms)
        operator = runtime_context.get_metrics_group()
        group = operator.add_group("tidemark")
        Value(group, "pythonThreadMode", mode).set(mode == THREAD)
        self._group_watermark = Value(group, "groupWatermark", mode)
        self._lag_ms = Value(group, "watermarkLagMs", mode)
        self._watermark_lag = Value(operator, "watermarkLag", mode)
        self._pending_records = Value(operator, "pendingRecords", mode)
        self._figures = {
            name: Value(group, name, mode)
            for name in (
                "processingTimeWatermark",
                "processingTimeDelayMs",
                "eventTimeWatermark",
                "eventTimeDelayMs",
            )
        }
        self._pending_counted_at = 0
        name = f"the Flink job's source {self.settings.coordinator_name!r}"
        self._watch = ProgressWatch(name, spec.stream_names, _log, self.settings.stall_log_after_ms)

    def close(self) -> None:  # noqa: D102
        if self._store is not None:
            self._store.close(self._planner.client if self._planner is not None else None)

    def process_element(self, value: Any, ctx: Any) -> Iterator[ReadTask | EpochEnd]:  # noqa: D102
        if self.settings.spec.bounded:
            with suppress(StoreThreadClosed):  # closing: nothing more to plan
                yield from self._plan_whole_read()
            return
        now = ctx.timer_service().current_processing_time()
        due = self._next_epoch_at.value()
        # The first tick starts the epochs. A later one starts them again if the epoch timer
        # is overdue by a tick's period: a restored job need not get its timer back.
        if due is None or now > due + _TICK_PERIOD_MS:
            self._schedule(ctx, now)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[ReadTask | EpochEnd]:  # noqa: D102
        if timestamp != self._next_epoch_at.value():
            return  # not the epoch timer in force
        with suppress(StoreThreadClosed):  # closing: nothing more to plan
            yield from self._plan_next_epoch()
            now = ctx.timer_service().current_processing_time()
            self._schedule(ctx, max(timestamp, now) + self.settings.epoch_interval_ms)

    def _schedule(self, ctx: Any, at: int) -> None:
        ctx.timer_service().register_processing_time_timer(at)
        self._next_epoch_at.update(at)

    def _plan_whole_read(self) -> Iterator[ReadTask | EpochEnd]:
        assert self._planner is not None and self._store is not None
        if self._frontier.value() is not None:
            return  # a bounded read plans once
        planner = self._planner
        epoch = (self._epoch.value() or 0) + 1
        end, tasks = self._store.call(_whole_read, planner)
        self._frontier.update(end.to_json())
        self._epoch.update(epoch)
        yield from tasks
        yield EpochEnd(epoch, end.watermark)

    def _plan_next_epoch(self) -> Iterator[ReadTask | EpochEnd]:
        """The next epoch's records; none while its plan waits on the store (idle)."""
        assert self._planner is not None and self._store is not None
        if self._plans.parked:  # an idle wait on the store thread, not over yet
            return
        saved = self._frontier.value()
        planner = self._planner
        forms = self._forms
        previous = forms.from_json(saved) if saved is not None else self._store.call(planner.start)
        step = self._plans.take(previous)
        if step is None:
            return
        epoch = (self._epoch.value() or 0) + 1
        if saved is None or step.frontier is not previous:  # unchanged: the state holds it
            self._frontier.update(forms.as_json(step.frontier))
        self._epoch.update(epoch)
        self._measure(step.frontier)
        yield from epoch_records(epoch, previous, step)

    def _measure(self, frontier: Frontier) -> None:
        now = _now_ms()
        watermark = frontier.watermark
        if watermark is not None:
            self._group_watermark.set(watermark)
            self._lag_ms.set(now - watermark)
            self._watermark_lag.set(now - watermark)
        if now - self._pending_counted_at >= _PENDING_EVERY_MS:
            assert self._planner is not None and self._store is not None
            client = self._planner.client
            tails = self._planner.tails  # as the epoch described them: no call when idle
            progress = self._store.call(self._watch.look, client, frontier.state, tails).progress
            self._pending_records.set(progress.unread_events)
            figures = {
                "processingTimeWatermark": progress.processing_time_watermark,
                "processingTimeDelayMs": progress.processing_time_delay_ms,
                "eventTimeWatermark": progress.event_time_watermark,
                "eventTimeDelayMs": progress.event_time_delay_ms,
            }
            for name, value in figures.items():
                if value is not None:
                    self._figures[name].set(value)
            self._pending_counted_at = now


def _whole_read(planner: SourcePlanner) -> tuple[Frontier, tuple[ReadTask, ...]]:
    start = planner.start()
    end = planner.end(start)
    return end, planner.tasks(start, end)


class TaskReader(FlatMapFunction):
    """Reads the tasks that fall to this subtask; turns each epoch's end into one watermark row."""

    def __init__(self, settings: SourceSettings):
        self.settings = settings
        self._store: StoreThread | None = None
        self._client: StoreClient | None = None
        self._pending: Pending[ReadTask, list[tuple[EventColumns, int]]] | None = None

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        subtask = subtask_of(runtime_context)
        self._index, self._parallelism = subtask.index, subtask.parallelism
        spec = self.settings.spec
        self._store = StoreThread("tidemark-reader-store")
        self._client = self._store.call(spec.client)
        self._pending = Pending(self._store, self._read)
        self._as_text = spec.deserializer != "bytes"
        mode = report_mode(runtime_context, self.settings.reader_name, self.settings.mode)
        operator = runtime_context.get_metrics_group()
        group = operator.add_group("tidemark")
        Value(group, "pythonThreadMode", mode).set(mode == THREAD)
        self._events = group.counter("eventsRead")
        self._bytes = group.counter("bytesRead")
        self._late = group.counter("lateEvents")
        self._late_count = LateCount()
        self._late_fraction = Value(group, "lateFractionPpm", mode)
        self._fetch_lag = Value(operator, "currentFetchEventTimeLag", mode)
        self._emit_lag = Value(operator, "currentEmitEventTimeLag", mode)
        self._watermark_lag = Value(operator, "watermarkLag", mode)

    def close(self) -> None:  # noqa: D102
        if self._store is not None:
            if self._pending is not None:
                self._pending.cancel()
            self._store.close(self._client)

    def _read(self, task: ReadTask) -> list[tuple[EventColumns, int]]:
        """On the store thread: the task's events, each store read's with when it arrived."""
        spec, client = self.settings.spec, self._client
        assert client is not None
        return [
            (columns, _now_ms())
            for columns in read_columns(client, task, spec.time, spec.deserializer)
        ]

    def flat_map(self, value: ReadTask | EpochEnd) -> Iterator[Row]:  # noqa: D102
        with suppress(StoreThreadClosed):  # closing: nothing more to emit
            yield from self._rows_for(value)

    def _rows_for(self, value: ReadTask | EpochEnd) -> Iterator[Row]:
        assert self._pending is not None
        if isinstance(value, EpochEnd):
            yield from self._emit(self._pending.drain())
            if value.watermark is not None:
                yield watermark_row(value.watermark)
                self._watermark_lag.set(max(0, _now_ms() - value.watermark))
            return
        if value.lane % self._parallelism != self._index:
            return
        self._pending.add(value)
        yield from self._emit(self._pending.ready())

    def _emit(
        self, done: Iterator[tuple[ReadTask, list[tuple[EventColumns, int]]]]
    ) -> Iterator[Row]:
        for _task, reads in done:
            for columns, fetched_at in reads:
                yield from batch_rows(columns, self._as_text)
                self._count(columns, fetched_at)

    def _count(self, columns: EventColumns, fetched_at: int) -> None:
        self._events.inc(len(columns))
        self._bytes.inc(sum(map(len, columns.payloads)))
        late = sum(columns.late)
        if late:
            self._late.inc(late)
        self._late_count.count(len(columns), late)
        self._late_fraction.set(self._late_count.parts_per_million)
        last = columns.event_times[-1]
        self._fetch_lag.set(fetched_at - last)
        self._emit_lag.set(_now_ms() - last)
