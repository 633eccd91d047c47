"""The source's Flink functions: the coordinator and the reader subtasks.

- :class:`EpochCoordinator` runs at parallelism 1, keyed by a constant, so
  its frontier lives in keyed ``ValueState`` and is checkpointed with the job.
  An epoch starts every ``epoch_interval_ms`` on a processing-time timer (the
  ticks only start it and keep the job unbounded: Flink's ``datagen`` emits a
  second's rows in one burst, so epochs paced by ticks would come once a
  second): it plans with :func:`~flink_adapter.epochs.plan_epoch` and emits
  the epoch's read tasks, then its end. A bounded read plans once, on its one
  tick.
- :class:`TaskReader` runs at the source's parallelism behind a broadcast:
  every subtask sees every record, reads the tasks whose index falls to it
  and, on each epoch's end, emits one watermark row, also when it had nothing
  to read. So Flink's watermark, the minimum over subtasks, is the epoch's
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

from connector.client.connection import StoreClient
from connector.reader.lineage import KnownSegments
from connector.reader.planning import (
    Frontier,
    advance_to_tail,
    frontier_at_cut,
    start_frontier,
)
from flink_adapter.epochs import EpochEnd, decode_record, plan_epoch, tasks_between
from flink_adapter.reading import batched, read_task
from flink_adapter.settings import SourceSettings

__all__ = ["EpochCoordinator", "TaskReader", "reader_row_type"]

#: The fields of one event in a reader row's ``events`` array.
EVENT_FIELDS = ["routing_key", "event", "event_time", "late", "offset", "ingestion_time"]
#: A reader row: a batch of one segment's events, or one epoch end's watermark.
#: ``kind`` is "events" or "wm"; ``wm`` is set on watermark rows only; ``segment`` is the
#: batch's segment; ``events`` is empty on watermark rows.
READER_FIELDS = ["kind", "wm", "segment", "events"]
_EVENT_FIELD_COUNT = len(EVENT_FIELDS)


def reader_row_type(deserializer: str) -> Any:
    """The reader rows' Flink type; ``event`` is BYTES for the bytes schema, else STRING.

    A row holds a batch of one segment's events (:func:`~flink_adapter.reading.batched`)
    in an array: PyFlink's cost is per row it hands to the JVM, and the JVM
    unnests the array (see :mod:`flink_adapter.graph`).
    """
    event = Types.PRIMITIVE_ARRAY(Types.BYTE()) if deserializer == "bytes" else Types.STRING()
    event_type = Types.ROW_NAMED(
        EVENT_FIELDS,
        [Types.STRING(), event, Types.LONG(), Types.BOOLEAN(), Types.LONG(), Types.LONG()],
    )
    return Types.ROW_NAMED(
        READER_FIELDS,
        [Types.STRING(), Types.LONG(), Types.STRING(), Types.OBJECT_ARRAY(event_type)],
    )


#: How often the ticks come (Flink's datagen at one row a second).
_TICK_PERIOD_MS = 1_000


def _client(settings: SourceSettings) -> StoreClient:
    timeout_s = settings.read_timeout_ms / 1000
    return StoreClient(settings.uri, retry_timeout_s=timeout_s, call_timeout_s=timeout_s)


def initial_frontier(client: StoreClient, settings: SourceSettings) -> Frontier:
    """Where the source starts: every stream's start position, as one frontier."""
    starts = {spec.start for spec in settings.streams}
    if len(starts) == 1:
        return start_frontier(client, settings.stream_names, starts.pop(), settings.lag_ms)
    cut: dict[str, int] = {}
    for spec in settings.streams:  # the builder allows mixing only explicit cuts
        cut.update(spec.start.as_dict())
    return start_frontier(client, settings.stream_names, cut, settings.lag_ms)


def final_frontier(client: StoreClient, settings: SourceSettings, start: Frontier) -> Frontier:
    """Where a bounded source ends: the end cuts, or the tails when the end is ``latest``."""
    ends = [spec.end for spec in settings.streams]
    if all(end is not None and end.is_latest for end in ends):
        return advance_to_tail(client, settings.stream_names, start, settings.lag_ms)
    cut: dict[str, int] = {}
    for end in ends:
        if end is not None:
            cut.update(end.as_dict())
    return frontier_at_cut(client, settings.stream_names, cut, settings.lag_ms)


class EpochCoordinator(KeyedProcessFunction):
    """Plans an epoch every interval from the frontier in keyed state; emits tasks, then the end.

    The next epoch's time is keyed state too, and its timer is Flink's, so
    both are checkpointed together: a restored coordinator goes on at once.
    """

    def __init__(self, settings: SourceSettings):
        self.settings = settings
        self._client: StoreClient | None = None
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
        self._client = _client(self.settings)
        self._known = KnownSegments()
        metrics = runtime_context.get_metrics_group().add_group("tidemark")
        metrics.gauge("groupWatermark", lambda: self._watermark or 0)
        metrics.gauge(
            "watermarkLagMs",
            lambda: int(time.time() * 1000) - self._watermark if self._watermark else 0,
        )

    def close(self) -> None:  # noqa: D102
        if self._client is not None:
            self._client.close()

    def process_element(self, value: Any, ctx: Any) -> Iterator[str]:  # noqa: D102
        if self.settings.bounded:
            yield from self._plan_whole_read()
            return
        now = ctx.timer_service().current_processing_time()
        due = self._next_epoch_at.value()
        # The first tick starts the epochs. A later one starts them again if the epoch timer
        # is overdue by a tick's period: a restored job need not get its timer back.
        if due is None or now > due + _TICK_PERIOD_MS:
            self._schedule(ctx, now)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[str]:  # noqa: D102
        if timestamp != self._next_epoch_at.value():
            return  # not the epoch timer in force
        yield from self._plan_next_epoch()
        now = ctx.timer_service().current_processing_time()
        self._schedule(ctx, max(timestamp, now) + self.settings.epoch_interval_ms)

    def _schedule(self, ctx: Any, at: int) -> None:
        ctx.timer_service().register_processing_time_timer(at)
        self._next_epoch_at.update(at)

    def _plan_whole_read(self) -> Iterator[str]:
        assert self._client is not None
        if self._frontier.value() is not None:
            return  # a bounded read plans once
        epoch = (self._epoch.value() or 0) + 1
        start = initial_frontier(self._client, self.settings)
        end = final_frontier(self._client, self.settings, start)
        tasks = tasks_between(
            self._client,
            start,
            end,
            epoch,
            max_events=self.settings.max_events_per_task,
            max_bytes=self.settings.max_bytes_per_task,
        )
        self._frontier.update(end.to_json())
        self._epoch.update(epoch)
        yield from (task.encode() for task in tasks)
        yield EpochEnd(epoch, end.watermark).encode()

    def _plan_next_epoch(self) -> Iterator[str]:
        assert self._client is not None
        saved = self._frontier.value()
        epoch = (self._epoch.value() or 0) + 1
        previous = (
            Frontier.from_json(saved)
            if saved is not None
            else initial_frontier(self._client, self.settings)
        )
        plan = plan_epoch(
            self._client,
            self.settings.stream_names,
            previous,
            epoch,
            self.settings.lag_ms,
            max_events=self.settings.max_events_per_epoch,
            max_bytes=self.settings.max_bytes_per_epoch,
            max_task_events=self.settings.max_events_per_task,
            max_task_bytes=self.settings.max_bytes_per_task,
            known=self._known,
        )
        self._frontier.update(plan.frontier.to_json())
        self._epoch.update(epoch)
        self._watermark = plan.frontier.watermark
        yield from (task.encode() for task in plan.tasks)
        yield plan.end.encode()


class TaskReader(FlatMapFunction):
    """Reads the tasks that fall to this subtask; turns each epoch's end into one watermark row."""

    def __init__(self, settings: SourceSettings):
        self.settings = settings
        self._client: StoreClient | None = None

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        self._index = runtime_context.get_index_of_this_subtask()
        self._parallelism = runtime_context.get_number_of_parallel_subtasks()
        self._client = _client(self.settings)
        self._serializer = self.settings.serializer()
        self._assigner = self.settings.assigner()
        self._as_text = self.settings.deserializer != "bytes"
        metrics = runtime_context.get_metrics_group().add_group("tidemark")
        self._events = metrics.counter("eventsRead")
        self._bytes = metrics.counter("bytesRead")
        self._late = metrics.counter("lateEvents")

    def close(self) -> None:  # noqa: D102
        if self._client is not None:
            self._client.close()

    def flat_map(self, value: str) -> Iterator[Row]:  # noqa: D102
        record = decode_record(value)
        if isinstance(record, EpochEnd):
            if record.watermark is not None:
                yield Row("wm", record.watermark, None, [])
            return
        if record.index % self._parallelism != self._index:
            return
        assert self._client is not None
        count = size = late = 0
        read = read_task(self._client, record, self._serializer, self._assigner, self._as_text)
        for batch in batched(read):
            yield Row(
                "events", None, batch[0].segment, [Row(*e[:_EVENT_FIELD_COUNT]) for e in batch]
            )
            count += len(batch)
            size += sum(e.size for e in batch)
            late += sum(e.late for e in batch)
        self._events.inc(count)
        self._bytes.inc(size)
        if late:
            self._late.inc(late)
