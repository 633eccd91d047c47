"""The ``tidemark`` sink: ``df.write`` and ``df.writeStream`` append events to a stream.

Each Spark task writes its partition with an :class:`EventWriter` whose writer
id is derived from the write and the partition only, never from the attempt.
The store numbers each writer's events per segment and skips numbers it
already has, so a task that Spark retries, or a micro-batch that a restarted
query runs again, replays the same numbered sequence and appends nothing twice.

The ids, and what PySpark 4.1 gives to build them:

- ``write(iterator)`` gets no ids as arguments, but it runs inside a Spark task,
  so :class:`pyspark.TaskContext` is there: ``partitionId()`` (the same for
  every attempt of a task; ``attemptNumber()`` is not) and the job's local
  properties.
- Streaming: the local properties ``sql.streaming.queryId`` (the query's id,
  kept in the checkpoint, so the same after a restart; unlike ``runId``) and
  ``streaming.sql.batchId`` (the micro-batch, which a restarted query re-runs
  with the same id and offsets when it was not committed). Writer id:
  ``spark-{queryId}-{batchId}-{partitionId}``.
- Batch: there is no query id, and the job and execution ids change when a
  job is run again. ``writer()`` runs once per write on the driver and its
  writer object is pickled into every task, so an id drawn there (or the
  ``writeId`` option, for a write the caller may run again) is the same for
  every attempt. Writer id: ``spark-{writeId}-{partitionId}``.

The replay skips the right events only if a retried partition holds the
same rows in the same order; that holds for deterministic plans (a Python
source's partitions, files, ``sortWithinPartitions``), not for rows whose order
depends on a shuffle's timing (``repartition(key).sortWithinPartitions(...)``
gives both a fixed order and each key's events in one task, so in order).
Rows with a null routing key are stored without a key, all in the segment
that owns the empty key's position (the writer's random placement would send
a replayed event elsewhere). A replay that finds its segment scaled since
the first attempt writes the events the sealed segment already holds again,
in its successors.

The rows of a ``tidemark`` read go to this sink as they come (a stream
copied into another): a watermark row of the source (``kind`` =
``watermark``, its event null) carries no event and is skipped, counted in
the task's commit message. It is not turned into a writer's event-time
assertion: a task's writer lives for one partition of one micro-batch, and
an assertion lapses when its writer closes (``close()`` marks it idle), so
it would hold nobody back. The query's own watermark, asserted once the
batch has committed, is the sink's option for that. Any other row with a
null event fails the task, naming the column.

``commit`` and ``abort`` have nothing to finish or undo: events are durable
when a task's ``write`` returns, and there is no transaction around a
micro-batch. After an abort (a task failed for good, the query stopped or
failed) every event a task wrote before it stays in the stream, where
readers see it: the events of the partitions that finished and the first
rows of the one that failed. Restarted from its checkpoint, the query runs
the batch again with the same writer ids, so the stream ends up holding
each event once; a query that is never restarted leaves that part of the
batch there. (PySpark builds a new stream writer on the driver for every
micro-batch and another one for its ``commit`` or ``abort``, so nothing may
be kept between those calls.)

Batch writes need ``mode("append")``: Spark refuses its default
``errorifexists`` for Python data sources, and this sink refuses
``overwrite`` (and the streaming ``complete`` mode) since a stream only grows.

``assertWatermark`` (streaming writes): after each committed micro-batch
the query asserts its event-time watermark on the stream, so a query that
reads it in the event-time domain follows this one's output watermark
(:mod:`spark_adapter.query_watermark`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from connector.client import BytesSerializer, EventWriter, StoreClient, StringSerializer
from connector.errors import InvalidArgumentError, TidemarkError
from spark_adapter.options import SinkOptions
from spark_adapter.query_stage import record_query_stage
from spark_adapter.query_watermark import assert_query_watermark, checkpoint_folder
from spark_adapter.schema import KIND, KIND_WATERMARK

__all__ = [
    "TidemarkBatchWriter",
    "TidemarkCommitMessage",
    "TidemarkStreamWriter",
    "batch_writer_id",
    "stream_writer_id",
]

_log = logging.getLogger(__name__)

#: Local properties Spark's micro-batch execution sets on every task of a batch.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def batch_writer_id(write_id: str, partition_id: int) -> str:
    """The writer id of partition ``partition_id`` of batch write ``write_id``."""
    return f"spark-{write_id}-{partition_id}"


def stream_writer_id(query_id: str, batch_id: int, partition_id: int) -> str:
    """The writer id of a partition of micro-batch ``batch_id`` of query ``query_id``."""
    return f"spark-{query_id}-{batch_id}-{partition_id}"


@dataclass(frozen=True)
class TidemarkCommitMessage(WriterCommitMessage):
    """What one task wrote: its writer id, its partition, how many events it sent.

    ``watermark_rows``: the source's watermark rows it skipped.
    """

    writer_id: str
    partition_id: int
    events: int
    watermark_rows: int = 0


@dataclass(frozen=True)
class _Columns:
    """Where the routing key and the event are in each row, and how the event is encoded."""

    key_index: int
    event_index: int
    event_column: str
    binary: bool
    #: The ``kind`` column of a ``tidemark`` read, when the data has one.
    kind_index: int | None = None

    @classmethod
    def of(cls, options: SinkOptions, schema: StructType) -> _Columns:
        """Resolves the option's columns in ``schema``; raises naming a missing or mistyped one."""
        key = _field(schema, options.routing_key_column, "routingKeyColumn")
        event = _field(schema, options.event_column, "eventColumn")
        if not isinstance(schema[key].dataType, StringType):
            msg = (
                f"option 'routingKeyColumn': column {schema[key].name!r} is "
                f"{schema[key].dataType.simpleString()}, expected string"
            )
            raise InvalidArgumentError(msg)
        event_type = schema[event].dataType
        if not isinstance(event_type, (StringType, BinaryType)):
            msg = (
                f"option 'eventColumn': column {schema[event].name!r} is "
                f"{event_type.simpleString()}, "
                "expected string or binary (use to_json() for structured events)"
            )
            raise InvalidArgumentError(msg)
        kind = schema.fieldNames().index(KIND) if KIND in schema.fieldNames() else None
        if kind is not None and not isinstance(schema[kind].dataType, StringType):
            kind = None  # not a tidemark read's column
        return cls(key, event, schema[event].name, isinstance(event_type, BinaryType), kind)

    def is_watermark_row(self, row: Row) -> bool:
        """Whether ``row`` is a ``tidemark`` source's watermark row (no event)."""
        return (
            self.kind_index is not None
            and row[self.event_index] is None
            and row[self.kind_index] == KIND_WATERMARK
        )


def _field(schema: StructType, name: str, option: str) -> int:
    names = schema.fieldNames()
    if name in names:
        return names.index(name)
    folded = [i for i, candidate in enumerate(names) if candidate.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    msg = f"option {option!r} names column {name!r}, which the data does not have: {names!r}"
    raise InvalidArgumentError(msg)


def _check_append(overwrite: bool) -> None:
    if overwrite:
        msg = "the tidemark sink only appends: use mode 'append' (got overwrite=True)"
        raise InvalidArgumentError(msg)


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        msg = "the tidemark sink writes inside Spark tasks only (no TaskContext here)"
        raise TidemarkError(msg)
    return context


def _write_rows(
    options: SinkOptions, columns: _Columns, writer_id: str, partition: int, rows: Iterator[Row]
) -> TidemarkCommitMessage:
    """Appends every row's event, skipping a source's watermark rows; returns once durable."""
    serializer: Any = BytesSerializer() if columns.binary else StringSerializer()
    count = skipped = 0
    with StoreClient(options.uri) as client:
        writer: EventWriter[Any] = EventWriter(
            client, options.stream, serializer, writer_id=writer_id
        )
        for index, row in enumerate(rows):
            event = row[columns.event_index]
            if event is None:
                if columns.is_watermark_row(row):
                    skipped += 1
                    continue
                msg = (
                    f"column {columns.event_column!r} is null in row {index} "
                    f"of writer {writer_id!r}: every row needs an event (a tidemark "
                    f"read's watermark rows are skipped when its {KIND!r} column is kept)"
                )
                raise InvalidArgumentError(msg)
            # "" routes like any key (deterministically) and is stored as no key.
            writer.write_event(event, row[columns.key_index] or "")
            count += 1
        writer.close()
    return TidemarkCommitMessage(writer_id, partition, count, skipped)


class TidemarkBatchWriter(DataSourceWriter):
    """Writes a DataFrame's rows; every attempt of a partition's task uses the same writer id."""

    def __init__(self, options: SinkOptions, schema: StructType, overwrite: bool):
        _check_append(overwrite)
        if options.assert_watermark:
            msg = "option 'assertWatermark' is for streaming writes: a batch write has no watermark"
            raise InvalidArgumentError(msg)
        self.options = options
        self.columns = _Columns.of(options, schema)
        self.write_id = options.write_id or uuid.uuid4().hex

    def write(self, iterator: Iterator[Row]) -> TidemarkCommitMessage:
        """Appends the partition's events; they are durable when this returns."""
        partition = _task().partitionId()
        writer_id = batch_writer_id(self.write_id, partition)
        return _write_rows(self.options, self.columns, writer_id, partition, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to finish: every event is durable already."""
        _log.info("tidemark write %s committed %d events", self.write_id, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo; running the write again with the same ``writeId`` adds only the rest."""
        _log.warning("tidemark write %s aborted after %d events", self.write_id, _total(messages))

    def __repr__(self) -> str:
        return (
            f"TidemarkBatchWriter(stream={str(self.options.stream)!r}, write_id={self.write_id!r})"
        )


class TidemarkStreamWriter(DataSourceStreamWriter):
    """Writes each micro-batch; a re-run batch or retried task appends nothing twice.

    Spark creates one of these per micro-batch on the driver and another one
    for ``commit`` or ``abort``, so it holds no state between calls.
    """

    def __init__(self, options: SinkOptions, schema: StructType, overwrite: bool):
        _check_append(overwrite)
        if options.assert_watermark:
            checkpoint_folder(options.checkpoint_location)  # refused now, not after a batch
        self.options = options
        self.columns = _Columns.of(options, schema)

    def write(self, iterator: Iterator[Row]) -> TidemarkCommitMessage:
        """Appends the partition's events; they are durable when this returns."""
        context = _task()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
        if not query_id or batch_id is None or not batch_id.isdigit():
            msg = (
                f"no streaming query id ({query_id!r}) or batch id ({batch_id!r}) in the task's "
                "local properties: the tidemark stream writer needs a micro-batch query"
            )
            raise TidemarkError(msg)
        partition = context.partitionId()
        writer_id = stream_writer_id(query_id, int(batch_id), partition)
        return _write_rows(self.options, self.columns, writer_id, partition, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Every event of the batch is durable already; with ``assertWatermark``, asserts it.

        The watermark the batch ran with is asserted on the stream after the
        batch's events (see :mod:`spark_adapter.query_watermark`), and the
        query's stage recorded (:mod:`spark_adapter.query_stage`).
        """
        _log.info("tidemark micro-batch %d committed %d events", batchId, _total(messages))
        if self.options.assert_watermark:
            assert_query_watermark(self.options, batchId)
            record_query_stage(self.options, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to undo: when the batch runs again its writers replay and add only the rest."""
        _log.warning("tidemark micro-batch %d aborted after %d events", batchId, _total(messages))

    def __repr__(self) -> str:
        return f"TidemarkStreamWriter(stream={str(self.options.stream)!r})"


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.events for m in messages if isinstance(m, TidemarkCommitMessage))
