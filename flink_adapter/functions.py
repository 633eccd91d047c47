"""The source's Flink functions: the coordinator and the reader subtasks.

- :class:`EpochCoordinator` runs at parallelism 1, keyed by a constant, so
  its frontier lives in keyed ``ValueState`` and is checkpointed with the job.
  An epoch starts every ``epoch_interval_ms`` on a processing-time timer (the
  ticks only start it and keep the job unbounded: Flink's ``datagen`` emits a
  second's rows in one burst, so epochs paced by ticks would come once a
  second): it plans with the reader core's
  :meth:`~connector.reader.source.SourcePlanner.step` and emits the epoch's
  read tasks, then its end (:mod:`flink_adapter.epochs`). A bounded read
  plans once, on its one tick.
- :class:`TaskReader` runs at the source's parallelism behind a broadcast:
  every subtask sees every record, reads the tasks whose lane falls to it
  (with the core's :func:`~connector.reader.source.read_columns`) and, on
  each epoch's end, emits one watermark row, also when it had nothing to
  read. So Flink's watermark, the minimum over subtasks, is the epoch's
  once all of them have read their share, whatever the parallelism.

Both keep no state but the coordinator's frontier: after a restore the
coordinator plans again from its checkpointed frontier, and Flink's
checkpoint barriers (behind the tasks on every channel) make each event
reach the sinks once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream.functions import FlatMapFunction, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor

from connector.reader.source import Frontier, ReadTask, SourcePlanner, read_columns
from flink_adapter.epochs import EpochEnd, epoch_records
from flink_adapter.reading import batch_rows
from flink_adapter.rows import KIND_WATERMARK, flink_millis
from flink_adapter.settings import SourceSettings

__all__ = ["EpochCoordinator", "TaskReader"]

#: How often the ticks come (Flink's datagen at one row a second).
_TICK_PERIOD_MS = 1_000


class EpochCoordinator(KeyedProcessFunction):
    """Plans an epoch every interval from the frontier in keyed state; emits tasks, then the end.

    The next epoch's time is keyed state too, and its timer is Flink's, so
    both are checkpointed together: a restored coordinator goes on at once.
    """

    def __init__(self, settings: SourceSettings):
        self.settings = settings
        self._planner: SourcePlanner | None = None
        self._watermark: int | None = None

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        self._frontier = runtime_context.get_state(
            ValueStateDescriptor("tidemark-frontier", Types.STRING())
        )
        self._epoch = runtime_context.get_state(
            ValueStateDescriptor("tidemark-epoch", Types.LONG())
        )
        self._next_epoch_at = runtime_context.get_state(
            ValueStateDescriptor("tidemark-next-epoch-at", Types.LONG())
        )
        spec = self.settings.spec
        self._planner = SourcePlanner(spec.client(), spec)
        metrics = runtime_context.get_metrics_group().add_group("tidemark")
        metrics.gauge("groupWatermark", lambda: self._watermark or 0)
        metrics.gauge(
            "watermarkLagMs",
            lambda: int(time.time() * 1000) - self._watermark if self._watermark else 0,
        )

    def close(self) -> None:  # noqa: D102
        if self._planner is not None:
            self._planner.client.close()

    def process_element(self, value: Any, ctx: Any) -> Iterator[ReadTask | EpochEnd]:  # noqa: D102
        if self.settings.spec.bounded:
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
        yield from self._plan_next_epoch()
        now = ctx.timer_service().current_processing_time()
        self._schedule(ctx, max(timestamp, now) + self.settings.epoch_interval_ms)

    def _schedule(self, ctx: Any, at: int) -> None:
        ctx.timer_service().register_processing_time_timer(at)
        self._next_epoch_at.update(at)

    def _plan_whole_read(self) -> Iterator[ReadTask | EpochEnd]:
        assert self._planner is not None
        if self._frontier.value() is not None:
            return  # a bounded read plans once
        epoch = (self._epoch.value() or 0) + 1
        start = self._planner.start()
        end = self._planner.end(start)
        tasks = self._planner.tasks(start, end)
        self._frontier.update(end.to_json())
        self._epoch.update(epoch)
        yield from tasks
        yield EpochEnd(epoch, end.watermark)

    def _plan_next_epoch(self) -> Iterator[ReadTask | EpochEnd]:
        assert self._planner is not None
        saved = self._frontier.value()
        epoch = (self._epoch.value() or 0) + 1
        previous = Frontier.from_json(saved) if saved is not None else self._planner.start()
        step = self._planner.step(previous)
        self._frontier.update(step.frontier.to_json())
        self._epoch.update(epoch)
        self._watermark = step.frontier.watermark
        yield from epoch_records(epoch, previous, step)


class TaskReader(FlatMapFunction):
    """Reads the tasks that fall to this subtask; turns each epoch's end into one watermark row."""

    def __init__(self, settings: SourceSettings):
        self.settings = settings
        self._client: Any = None

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        self._index = runtime_context.get_index_of_this_subtask()
        self._parallelism = runtime_context.get_number_of_parallel_subtasks()
        self._client = self.settings.spec.client()
        self._as_text = self.settings.spec.deserializer != "bytes"
        metrics = runtime_context.get_metrics_group().add_group("tidemark")
        self._events = metrics.counter("eventsRead")
        self._bytes = metrics.counter("bytesRead")
        self._late = metrics.counter("lateEvents")

    def close(self) -> None:  # noqa: D102
        if self._client is not None:
            self._client.close()

    def flat_map(self, value: ReadTask | EpochEnd) -> Iterator[Row]:  # noqa: D102
        if isinstance(value, EpochEnd):
            if value.watermark is not None:
                yield Row(KIND_WATERMARK, flink_millis(value.watermark), None, [])
            return
        if value.lane % self._parallelism != self._index:
            return
        spec = self.settings.spec
        for columns in read_columns(self._client, value, spec.time, spec.deserializer):
            yield from batch_rows(columns, self._as_text)
            self._events.inc(len(columns))
            self._bytes.inc(sum(map(len, columns.payloads)))
            late = sum(columns.late)
            if late:
                self._late.inc(late)
