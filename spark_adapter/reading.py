"""The readers of the ``tidemark`` format: streaming micro-batches and bounded batch reads.

The driver plans with the reader core (:class:`~connector.reader.source.SourcePlanner`):
offsets are its frontiers, partitions its read tasks. Each offset Spark
shows (a batch's ``startOffset`` and ``endOffset``, the ``latestOffset`` of
its progress) leads with the figures of where the query has planned to, by
the rules and names of the store's reader-group metrics
(:mod:`connector.groups.progress`, the glossary): ``streams``, per stream
its ``unreadEvents`` and ``processingTimeDelayMs``, then ``progress``, the
query's ``unreadEvents``, processing-time and event-time watermarks and
their delays (``...Watermark``, ``...DelayMs``) and their ``diagnosis``;
the frontier follows, and is all a restart reads back. The driver makes
and reads each offset's frontier once
(:class:`~connector.reader.source.FrontierForms`): a trigger that plans
from the offset it handed out last, while no tail moved, looks at no
segment and returns that offset (so Spark makes no batch); a plan that
moved only watermarks is a new offset when it raises Spark's watermark by
``idleWatermarkStep`` (:mod:`spark_adapter.batching`; in the
processing-time domain never), and counts for the figures either way.
Once per stall longer than ``stallLogAfter`` the driver logs what holds
the watermark.
The figures are counted on the tails the planner described last: a trigger
over idle streams costs the store one small call (a ``DescribeTails`` that
answers nothing changed), however many segments they have. With
``readerGroup`` the driver also publishes each position the query has
processed as that reader group, so the store's metrics show the query's
figures. A batch has a task per lineage chain of segments, cut into pieces
for about ``minPartitions`` tasks
(:func:`~connector.reader.source.tasks.spread`: a batch often reads one
segment only, and one task keeps one core busy). Each task reads its
ranges with :func:`~connector.reader.source.read_columns`, its store reads
of 1 MiB running ahead of the decoding in a thread of their own, and
returns the columns as Arrow record batches. In a time domain with watermarks every
row carries the watermark as of the end of its micro-batch and whether it
is late under the one in force (the end of the batch before), and a batch
that reads events or whose watermark rose carries one extra
``kind = 'watermark'`` row, so Spark's watermark advances on idle streams
too and Spark sees every stream's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from connector.errors import TidemarkError
from connector.groups.lag import GroupLag, StreamLag
from connector.groups.progress import GroupProgress, delay_ms
from connector.reader.group import ReaderGroupManager
from connector.reader.progress_watch import DEFAULT_STALL_LOG_AFTER_MS, ProgressWatch
from connector.reader.source import (
    EventColumns,
    Frontier,
    FrontierForms,
    ReadSpec,
    ReadTask,
    SourcePlanner,
    read_columns,
    text_of,
)
from connector.reader.source.tasks import spread
from connector.reader.source.timekeeping import is_late
from spark_adapter.admission import budget_of, default_read_limit
from spark_adapter.batching import makes_a_batch
from spark_adapter.options import DEFAULT_IDLE_WAIT_MS
from spark_adapter.schema import KIND_EVENT, KIND_WATERMARK

__all__ = ["TidemarkBatchReader", "TidemarkPartition", "TidemarkStreamReader", "arrow_batches"]

_ROWS_PER_BATCH = 8192
#: A task's store reads: 1 MiB each (about 8,700 events of 100 bytes, an Arrow batch),
#: so Spark converts the first rows while the rest are read; up to two run ahead.
TASK_READ_BYTES = 1024 * 1024
TASK_READS_AHEAD = 2
_log = logging.getLogger(__name__)


class TidemarkPartition(InputPartition):
    """What one Spark task reads: a read task and the watermark of its micro-batch's end."""

    def __init__(self, task: ReadTask | None, watermark: int | None, watermark_row: bool = False):
        super().__init__(None)
        self.task = task
        self.watermark = watermark
        self.watermark_row = watermark_row

    def __repr__(self) -> str:
        return f"TidemarkPartition({self.task!r}, watermark={self.watermark})"


class _Reading:
    """What the stream and batch readers share: the spec, the schema, a lazy planner, task reads."""

    def __init__(self, spec: ReadSpec, schema: StructType, min_partitions: int = 1):
        self._spec = spec
        self._schema = schema
        self._min_partitions = min_partitions
        self._planner: SourcePlanner | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_planner"] = None  # a channel does not travel to the workers
        return state

    @property
    def _plans(self) -> SourcePlanner:
        if self._planner is None:
            self._planner = SourcePlanner(self._spec.client(), self._spec)
        return self._planner

    def _partitions(
        self, begin: Frontier, end: Frontier, watermark_row: bool
    ) -> list[TidemarkPartition]:
        tasks = spread(self._plans.client, self._plans.tasks(begin, end), self._min_partitions)
        if not tasks:
            if watermark_row and end.rose_above(begin):
                return [TidemarkPartition(None, end.watermark, watermark_row=True)]
            return []
        # A batch that reads events carries its watermark even when it did not rise: each
        # stream's watermark operator in Spark counts as 0 until it sees one (Spark's
        # watermark over two streams would stay 0 while one stream's never rose since the
        # query started). The row rides with the first task: a Python task costs ~0.1 s.
        wants_row = watermark_row and end.watermark is not None
        return [
            TidemarkPartition(task, end.watermark, watermark_row=wants_row and i == 0)
            for i, task in enumerate(tasks)
        ]

    def read(self, partition: TidemarkPartition) -> Iterator[pa.RecordBatch]:
        """Reads the partition's task and yields Arrow record batches of rows.

        A batch read that plans no partition gets one of PySpark's own
        (``InputPartition(None)``): it reads nothing.
        """
        if not isinstance(partition, TidemarkPartition):
            return
        schema = to_arrow_schema(self._schema, timezone="UTC")
        if partition.watermark_row:
            yield watermark_batch(partition.watermark, schema)
        if partition.task is None or not partition.task.ranges:
            return
        spec = self._spec
        with spec.client() as client:
            columns = read_columns(
                client,
                partition.task,
                spec.time,
                spec.deserializer,
                TASK_READ_BYTES,
                TASK_READS_AHEAD,
            )
            yield from arrow_batches(columns, partition.watermark, schema)

    def _stop(self) -> None:
        if self._planner is not None:
            self._planner.client.close()
            self._planner = None


class TidemarkStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a ``tidemark`` stream; offsets are core frontiers as nested dicts.

    Spark's admission control (PySpark 4.2+): each batch is planned from the
    start Spark passes, within the read limit it passes
    (:mod:`spark_adapter.admission`); ``Trigger.AvailableNow`` reads what is
    there when the query starts and stops; :meth:`reportLatestOffset` tells
    Spark's progress where the streams' tails are. Offsets checkpointed by
    earlier versions, whose parts were JSON strings, are still read.
    """

    def __init__(
        self,
        spec: ReadSpec,
        schema: StructType,
        reader_group: tuple[str, str] | None = None,
        stall_log_after_ms: int = DEFAULT_STALL_LOG_AFTER_MS,
        min_partitions: int = 1,
        idle_wait_ms: int = DEFAULT_IDLE_WAIT_MS,
        idle_watermark_step_ms: int = 0,
    ):
        super().__init__(spec, schema, min_partitions)
        self._reader_group = reader_group
        self._idle_wait_ms = idle_wait_ms
        self._watermark_step_ms = idle_watermark_step_ms
        self._idle = False  # the last latestOffset found nothing new for Spark
        self._waited_ms = 0  # how long the last latestOffset waited on the store
        self._start: Frontier | None = None
        self._target: Frontier | None = None
        self._last_end: Frontier | None = None
        #: The start of the last trigger and its plan, when held back from Spark (no batch).
        self._held: tuple[Frontier, Frontier] | None = None
        self._published: str | None = None  # why the last publication failed (None: it did not)
        self._published_position: Frontier | None = None
        group = "" if reader_group is None else f" (reader group {'/'.join(reader_group)})"
        self._watch = ProgressWatch(
            f"the Spark query{group}", spec.stream_names, _log, stall_log_after_ms
        )
        self._described = False  # a latestOffset described the tails since the last report
        self._forms = FrontierForms()
        self._lag_by_stream: tuple[GroupLag, dict[str, StreamLag]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.update(_start=None, _target=None, _last_end=None, _published=None, _described=False)
        state.update(_idle=False, _waited_ms=0, _held=None, _published_position=None)
        state.update(_forms=FrontierForms(), _lag_by_stream=None)
        return state

    def _initial(self) -> Frontier:
        """``startingStreamCut`` as a frontier, computed once (``latest`` would move)."""
        if self._start is None:
            self._start = self._plans.start()
        return self._start

    def _offset(
        self,
        frontier: Frontier,
        planned_to: Frontier | None = None,
        waited_ms: int | None = None,
    ) -> dict[str, Any]:
        """``frontier`` as Spark's offset, led by the figures of ``planned_to`` (see the module).

        The figures are counted on the tails the planner described last (by the
        plan of ``frontier``, or, before any, now).

        With ``readerGroup`` it names the group (``scope/group``): a sink with
        ``assertWatermark`` reads it from the offset log to record its stage.
        With ``waited_ms`` (a report's), it says it as ``idleWaitMs``.
        """
        look = self._watch.look(
            self._plans.client, (planned_to or frontier).state, self._plans.tails
        )
        now = look.progress.now
        streams = {
            name: {
                "unreadEvents": behind.events,
                "processingTimeDelayMs": delay_ms(now, behind.processing_time_watermark),
            }
            for name, behind in self._by_stream(look.lag).items()
        }
        named = {} if self._reader_group is None else {"readerGroup": "/".join(self._reader_group)}
        waited = {} if waited_ms is None else {"idleWaitMs": waited_ms}
        return {
            "streams": streams,
            "progress": _figures(look.progress),
            **waited,
            **named,
            **self._forms.as_dict(frontier),
        }

    def _by_stream(self, lag: GroupLag) -> dict[str, StreamLag]:
        """``lag`` per stream, counted once per lag object (the same while nothing moved)."""
        if self._lag_by_stream is None or self._lag_by_stream[0] is not lag:
            self._lag_by_stream = (lag, lag.by_stream(self._spec.stream_names))
        return self._lag_by_stream[1]

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        """Where a new query starts: ``startingStreamCut``."""
        return self._offset(self._initial())

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (Spark's name)
        """``maxEventsPerTrigger`` or ``maxBytesPerTrigger`` as Spark's read limit."""
        return default_read_limit(self._spec)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (Spark's name)
        """Takes the target of a ``Trigger.AvailableNow`` query: every open segment's tail now."""
        self._target = self._plans.tail(self._initial())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        """The end of the micro-batch after ``start``: everything now, or what ``limit`` allows.

        Returns ``start`` itself when nothing moved (no event, no watermark),
        so Spark plans no batch and ``Trigger.AvailableNow`` ends, and also
        when only watermarks moved without raising Spark's by
        ``idleWatermarkStep`` (:mod:`spark_adapter.batching`). Under
        ``Trigger.AvailableNow`` no end passes the target; a batch that would
        is planned to the target instead (so the last batch of such a run may
        hold more than the limit: what the limit left before the target).
        After a call that found nothing new, the store is asked to wait for
        a change, at most ``idleWait`` (not under ``Trigger.AvailableNow``).
        """
        begin = self._forms.from_dict(start)
        self._publish(self._processed(begin))
        wait_ms = self._idle_wait_ms if self._idle and self._target is None else 0
        budget = budget_of(limit, self._spec)
        end = self._plans.next(begin, budget, until=self._target, wait_ms=wait_ms)
        self._waited_ms = self._plans.tails.waited_ms
        self._last_end = end
        self._described = True
        held = self._held
        if held is None or held[0] is not begin or held[1] is not end:  # else: held again
            step = self._watermark_step_ms if self._target is None else 0
            held = (begin, end) if not makes_a_batch(begin, end, step) else None
        self._idle = held is not None
        self._held = held
        return start if self._idle else self._offset(end)

    def _processed(self, begin: Frontier) -> Frontier:
        """Where the query is: Spark's ``begin``, or the plan held back from it."""
        held = self._held
        return held[1] if held is not None and held[0] is begin else begin

    def reportLatestOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        """Every open segment's tail now, for Spark's progress (``latestOffset`` per source).

        Its ``streams`` say how far the last batch planned (or the plan held
        back, :mod:`spark_adapter.batching`) is behind these tails, and
        ``idleWaitMs`` how long that trigger's ``latestOffset`` waited on the
        store for a change (``idleWait``; its call's whole time, 0 when it
        could not wait): the rest of Spark's ``latestOffset`` duration is
        planning. Spark asks right after ``latestOffset``, in the same
        trigger: the tails are then those ``latestOffset`` described (no call).
        """
        planned = self._last_end if self._last_end is not None else self._initial()
        tail = self._plans.tail(planned, refresh=not self._described)
        self._described = False
        return self._offset(tail, planned, waited_ms=self._waited_ms)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """A task per lineage chain, cut for ``minPartitions``; the watermark row rides the first.

        A batch without events whose watermark rose has one task for that row alone.
        """
        return self._partitions(self._forms.from_dict(start), self._forms.from_dict(end), True)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: positions live in Spark's checkpoint."""

    def _publish(self, processed: Frontier) -> None:
        """With ``readerGroup``: ``processed`` as the group's position in the store.

        Called from ``latestOffset``, whose ``start`` Spark has processed
        whole (it plans a batch only after the one before committed, and
        runs an uncommitted one again without asking), at every trigger:
        so the position shows as soon as the next trigger, also when no
        batch follows (Spark's own ``commit`` comes only with the next
        batch). The store is asked nothing while the position is the
        frontier object published last (an idle query's triggers), and
        written only when the position moved. A failed publication is
        logged once per cause, never raised: it is for monitoring, and the
        next trigger publishes again.
        """
        if self._reader_group is None or processed is self._published_position:
            return
        scope, group = self._reader_group
        try:
            manager = ReaderGroupManager(self._plans.client)
            state = processed.state
            if not manager.publish_position(scope, group, self._spec.stream_names, state):
                cause = "it has readers of its own"
            else:
                cause = None
        except TidemarkError as error:
            cause = f"{type(error).__name__}: {error}"
        if cause is not None and cause != self._published:
            _log.warning(
                "option 'readerGroup': the query's position is not published as %s/%s: %s",
                scope,
                group,
                cause,
            )
        self._published = cause
        self._published_position = processed if cause is None else None

    def stop(self) -> None:
        """Closes the driver's connection; stopping twice is harmless."""
        self._stop()


def _figures(progress: GroupProgress) -> dict[str, Any]:
    """A group's figures under Spark's camelCase names (the glossary's, as in the metrics)."""
    return {
        "unreadEvents": progress.unread_events,
        "processingTimeWatermark": progress.processing_time_watermark,
        "processingTimeDelayMs": progress.processing_time_delay_ms,
        "eventTimeWatermark": progress.event_time_watermark,
        "eventTimeDelayMs": progress.event_time_delay_ms,
        "diagnosis": progress.diagnosis.value,
    }


class TidemarkBatchReader(_Reading, DataSourceReader):
    """A bounded read from ``startingStreamCut`` to ``endingStreamCut`` (default: now)."""

    def partitions(self) -> Sequence[InputPartition]:
        """A task per lineage chain of segments, cut for ``minPartitions``."""
        try:
            begin = self._plans.start()
            return self._partitions(begin, self._plans.end(begin), watermark_row=False)
        finally:
            self._stop()


# --- Arrow --------------------------------------------------------------------


def arrow_batches(
    columns: Iterator[EventColumns], watermark: int | None, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The events of ``columns`` as Arrow record batches of ``schema`` (up to 8,192 rows each).

    Every row carries ``watermark``, and ``late`` under its part's watermark
    in force (:func:`~connector.reader.source.timekeeping.is_late`, on arrays).
    Payloads become the ``event`` column as
    binary, checked as UTF-8 by Arrow for the string deserializers (the
    first bad event is named); the constant columns are built without a list.
    """
    pending: list[EventColumns] = []
    rows = 0
    for part in columns:
        pending.append(part)
        rows += len(part)
        if rows >= _ROWS_PER_BATCH:
            yield _batch(pending, watermark, schema)
            pending, rows = [], 0
    if pending:
        yield _batch(pending, watermark, schema)


#: Spark's latest timestamp, 9999-12-31T23:59:59.999Z, in epoch ms.
SPARK_LATEST_MS = 253_402_300_799_999


def spark_micros(watermark: int | None) -> int | None:
    """A watermark (epoch ms) as a Spark timestamp (µs); the end of time as Spark's latest.

    The core's END_OF_TIME (a group with nothing left to read) does not fit a
    Spark timestamp; Spark's latest one closes every window all the same.
    """
    return None if watermark is None else min(watermark, SPARK_LATEST_MS) * 1000


def _batch(parts: list[EventColumns], watermark: int | None, schema: pa.Schema) -> pa.RecordBatch:
    count = sum(len(part) for part in parts)
    timestamp = schema.field("event_time").type
    watermark_us = spark_micros(watermark)
    event_times = _millis(_joined(parts, "event_times"))
    ingestion_times = _millis(_joined(parts, "ingestion_times"))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(_joined(parts, "routing_keys"), pa.string()),
            _events(parts, schema.field("event").type),
            pa.array(event_times * 1000, timestamp),
            pa.repeat(pa.scalar(watermark_us, timestamp), count),
            pa.repeat(pa.scalar(KIND_EVENT), count),
            pa.concat_arrays([pa.repeat(pa.scalar(part.segment), len(part)) for part in parts]),
            pa.array(_joined(parts, "offsets"), pa.int64()),
            pa.array(ingestion_times * 1000, timestamp),
            pa.array(_late(parts, event_times)),
        ],
        schema=schema,
    )


def _joined(parts: list[EventColumns], column: str) -> list[Any]:
    """One column of every part, in order; a lone part's own list (no copy per event)."""
    if len(parts) == 1:
        return getattr(parts[0], column)
    return [value for part in parts for value in getattr(part, column)]


def _late(parts: list[EventColumns], event_times: np.ndarray) -> np.ndarray:
    """Whether each event is late under its part's watermark in force, an array at a time."""
    flags = np.zeros(len(event_times), dtype=bool)
    start = 0
    for part in parts:
        end = start + len(part)
        flags[start:end] = is_late(event_times[start:end], part.watermark_in_force)
        start = end
    return flags


def _events(parts: list[EventColumns], kind: pa.DataType) -> pa.Array:
    binary = pa.array(_joined(parts, "payloads"), pa.binary())
    if kind == pa.binary():
        return binary
    try:
        return binary.cast(kind)  # checks UTF-8
    except pa.ArrowInvalid:
        # Name the first bad event (raises); Arrow's message names none.
        for part in parts:
            for payload, offset in zip(part.payloads, part.offsets, strict=True):
                text_of(payload, part.segment, offset)
        raise


def _millis(millis: list[int]) -> np.ndarray:
    """Epoch milliseconds as an int64 array."""
    return np.fromiter(millis, np.int64, len(millis))


def watermark_batch(watermark: int | None, schema: pa.Schema) -> pa.RecordBatch:
    """The batch's watermark row: ``kind`` watermark, event columns null."""
    row = dict.fromkeys(schema.names)
    row.update(watermark=spark_micros(watermark), kind=KIND_WATERMARK)
    return pa.RecordBatch.from_pylist([row], schema=schema)
