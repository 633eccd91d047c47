"""The readers of the ``tidemark`` format: streaming micro-batches and bounded batch reads.

The driver plans offsets (:mod:`spark_adapter.planning`); each task reads
whole events of its byte ranges straight from the store and returns them as
Arrow record batches. In the ingestion-time domain every row carries the
watermark as of the end of its micro-batch, and a batch whose watermark rose
carries one extra ``kind = 'watermark'`` row, so Spark's watermark advances on
idle streams too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from connector.client.connection import StoreClient
from connector.errors import InvalidArgumentError
from connector.framing import FrameColumns, decode_columns
from connector.reader.planning import (
    Frontier,
    SegmentRange,
    advance_to_tail,
    lineage_chains,
    ranges_between,
    read_range,
)
from connector.reader.timestamps import (
    FieldTimestampAssigner,
    IngestionTimeAssigner,
    TimestampAssigner,
)
from spark_adapter.admission import AvailableNowTarget, budget_of, default_read_limit
from spark_adapter.options import TidemarkOptions
from spark_adapter.planning import batch_end, frontier_of, lag_ms, next_end, offset_of, start
from spark_adapter.schema import KIND_EVENT, KIND_WATERMARK

try:  # orjson comes with the spark extra; json is the fallback
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    _loads = json.loads

__all__ = ["TidemarkBatchReader", "TidemarkStreamReader", "batch_reader", "stream_reader"]

_ROWS_PER_BATCH = 8192


class TidemarkPartition(InputPartition):
    """What one task reads: byte ranges (a lineage chain, in order) and the batch watermark."""

    def __init__(
        self, ranges: Sequence[SegmentRange], watermark: int | None, watermark_row: bool = False
    ):
        super().__init__(None)
        self.ranges = tuple(ranges)
        self.watermark = watermark
        self.watermark_row = watermark_row

    def __repr__(self) -> str:
        return f"TidemarkPartition({list(self.ranges)!r}, watermark={self.watermark})"


class _Reading:
    """What the stream and batch readers share: options, schema, a lazy client, task reads."""

    def __init__(self, options: TidemarkOptions, schema: StructType):
        self._options = options
        self._schema = schema
        self._client: StoreClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None  # a channel does not travel to the workers
        return state

    @property
    def _store(self) -> StoreClient:
        if self._client is None:
            self._client = StoreClient(self._options.uri)
        return self._client

    def _partitions(
        self, begin: Frontier, end: Frontier, watermark_row: bool
    ) -> list[TidemarkPartition]:
        chains = lineage_chains(self._store, ranges_between(begin, end))
        rose = end.watermark is not None and (
            begin.watermark is None or end.watermark > begin.watermark
        )
        wants_row = watermark_row and rose
        if not chains:
            return [TidemarkPartition((), end.watermark, watermark_row=True)] if wants_row else []
        # The watermark row rides with the first task: a Python task costs Spark ~0.1 s to start.
        return [
            TidemarkPartition(chain, end.watermark, watermark_row=wants_row and i == 0)
            for i, chain in enumerate(chains)
        ]

    def read(self, partition: TidemarkPartition) -> Iterator[pa.RecordBatch]:
        """Reads the partition's ranges and yields Arrow record batches of rows."""
        arrow_schema = _arrow_schema(self._schema)
        if partition.watermark_row:
            yield pa.RecordBatch.from_pylist(
                [_watermark_row(partition.watermark)], schema=arrow_schema
            )
        if not partition.ranges:
            return
        client = StoreClient(self._options.uri)
        try:
            rows = _Rows(self._options, partition.watermark)
            for segment_range in partition.ranges:
                for result in read_range(client, segment_range):
                    rows.add(segment_range.segment, result.data, result.offset)
                    if rows.size >= _ROWS_PER_BATCH:
                        yield rows.flush(arrow_schema)
            if rows.size:
                yield rows.flush(arrow_schema)
        finally:
            client.close()


class TidemarkStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a ``tidemark`` stream; offsets are core frontiers as nested dicts.

    Spark's admission control (PySpark 4.2+): each batch is planned from the
    start Spark passes, within the read limit it passes
    (:mod:`spark_adapter.admission`); ``Trigger.AvailableNow`` reads what is
    there when the query starts and stops; :meth:`reportLatestOffset` tells
    Spark's progress where the streams' tails are.
    """

    def __init__(self, options: TidemarkOptions, schema: StructType):
        super().__init__(options, schema)
        self._start: Frontier | None = None
        self._target: AvailableNowTarget | None = None
        self._last_begin: Frontier | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_start"] = None
        state["_target"] = None
        state["_last_begin"] = None
        return state

    def _initial(self) -> Frontier:
        """``startingStreamCut`` as a frontier, computed once (``latest`` would move)."""
        if self._start is None:
            self._start = start(self._store, self._options)
        return self._start

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        """Where a new query starts: ``startingStreamCut``."""
        return offset_of(self._initial())

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (Spark's name)
        """``maxEventsPerTrigger`` or ``maxBytesPerTrigger`` as Spark's read limit."""
        return default_read_limit(self._options)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (Spark's name)
        """Takes the target of a ``Trigger.AvailableNow`` query: every open segment's tail now."""
        options = self._options
        tail = advance_to_tail(self._store, options.streams, self._initial(), lag_ms(options))
        self._target = AvailableNowTarget(tail)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        """The end of the micro-batch after ``start``: everything now, or what ``limit`` allows.

        Returns ``start`` itself when nothing moved (no event, no watermark),
        so Spark plans no batch and ``Trigger.AvailableNow`` ends. Under
        ``Trigger.AvailableNow`` no end passes the target; a batch that would
        is planned to the target instead (so the last batch of such a run may
        hold more than the limit: what the limit left before the target).
        """
        begin = frontier_of(start)
        self._last_begin = begin
        end = next_end(self._store, self._options, begin, budget_of(limit, self._options))
        if self._target is not None and not self._target.contains(end):
            end = self._target.end_from(begin)
        offset = offset_of(end)
        return start if offset == offset_of(begin) else offset

    def reportLatestOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        """Every open segment's tail now, for Spark's progress (``latestOffset`` per source)."""
        begin = self._last_begin if self._last_begin is not None else self._initial()
        tail = advance_to_tail(self._store, self._options.streams, begin, lag_ms(self._options))
        return offset_of(tail)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One task per lineage chain of segments, plus one for the watermark row."""
        return self._partitions(frontier_of(start), frontier_of(end), watermark_row=True)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: positions live in Spark's checkpoint."""

    def stop(self) -> None:
        """Closes the driver's connection; stopping twice is harmless."""
        if self._client is not None:
            self._client.close()
            self._client = None


class TidemarkBatchReader(_Reading, DataSourceReader):
    """A bounded read from ``startingStreamCut`` to ``endingStreamCut`` (default: now)."""

    def partitions(self) -> Sequence[InputPartition]:
        """One task per lineage chain of segments."""
        begin = start(self._store, self._options)
        end = batch_end(self._store, self._options, begin)
        return self._partitions(begin, end, watermark_row=False)


def batch_reader(options: TidemarkOptions, schema: StructType) -> DataSourceReader:
    """A reader of the bounded range ``options`` names."""
    return TidemarkBatchReader(options, schema)


def stream_reader(options: TidemarkOptions, schema: StructType) -> DataSourceStreamReader:
    """A streaming reader of the streams ``options`` names."""
    return TidemarkStreamReader(options, schema)


# --- rows ---------------------------------------------------------------------


class _Rows:
    """Column buffers for one Arrow batch, filled a store read at a time.

    Frames are decoded into columns (:func:`connector.framing.decode_columns`);
    only what needs Python per event does so: the timestamp assigner. Payloads
    become the ``event`` column as binary, checked as UTF-8 by Arrow for the
    string deserializers; the constant columns are built without a list.
    """

    def __init__(self, options: TidemarkOptions, watermark: int | None):
        self._deserializer = options.deserializer
        assigner = options.assigner()
        self._assigner: TimestampAssigner[Any] | None = (
            None if isinstance(assigner, IngestionTimeAssigner) else assigner
        )
        self._watermark_us = None if watermark is None else watermark * 1000
        self._clear()

    def _clear(self) -> None:
        self.keys: list[str | None] = []
        self.payloads: list[bytes] = []
        self.event_times: list[int] = []
        self.segment_runs: list[tuple[str, int]] = []  # (segment, rows), in row order
        self.offsets: list[int] = []
        self.ingestion: list[int] = []

    @property
    def size(self) -> int:
        return len(self.payloads)

    def add(self, segment: str, data: bytes, base_offset: int) -> None:
        columns = decode_columns(data, base_offset)
        self.keys += columns.routing_keys
        self.payloads += columns.payloads
        self.offsets += columns.offsets
        self.ingestion += columns.ingestion_times
        self.event_times += self._event_times(segment, columns)
        self.segment_runs.append((segment, len(columns.offsets)))

    def _event_times(self, segment: str, columns: FrameColumns) -> list[int]:
        """Event times in ms: the assigner's, or the ingestion times."""
        assigner = self._assigner
        if assigner is None:
            return columns.ingestion_times
        if self._deserializer == "json":
            # JSON events with an integer timestamp field: read it directly (the common case).
            field = assigner.field if isinstance(assigner, FieldTimestampAssigner) else None
            times = []
            for payload, ingestion_time in zip(
                columns.payloads, columns.ingestion_times, strict=True
            ):
                value = _loads(payload)
                stamp = value.get(field) if field is not None and type(value) is dict else None
                if type(stamp) is not int:
                    stamp = assigner.extract_timestamp(value, ingestion_time)
                times.append(stamp)
            return times
        values: list[Any] = columns.payloads
        if self._deserializer == "string":
            values = [
                _text(payload, segment, offset)
                for payload, offset in zip(columns.payloads, columns.offsets, strict=True)
            ]
        extract = assigner.extract_timestamp
        return [extract(v, t) for v, t in zip(values, columns.ingestion_times, strict=True)]

    def flush(self, schema: pa.Schema) -> pa.RecordBatch:
        count = self.size
        timestamp = schema.field("event_time").type
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.keys, pa.string()),
                self._events(schema.field("event").type),
                _timestamps(self.event_times, timestamp),
                pa.repeat(pa.scalar(self._watermark_us, timestamp), count),
                pa.repeat(pa.scalar(KIND_EVENT), count),
                pa.concat_arrays(
                    [pa.repeat(pa.scalar(name), rows) for name, rows in self.segment_runs]
                ),
                pa.array(self.offsets, pa.int64()),
                _timestamps(self.ingestion, timestamp),
            ],
            schema=schema,
        )
        self._clear()
        return batch

    def _events(self, kind: pa.DataType) -> pa.Array:
        binary = pa.array(self.payloads, pa.binary())
        if kind == pa.binary():
            return binary
        try:
            return binary.cast(kind)  # checks UTF-8
        except pa.ArrowInvalid:
            # Name the first bad event (raises); Arrow's message names none.
            for (segment, offset), payload in zip(self._positions(), self.payloads, strict=True):
                _text(payload, segment, offset)
            raise

    def _positions(self) -> Iterator[tuple[str, int]]:
        offsets = iter(self.offsets)
        for segment, rows in self.segment_runs:
            for _ in range(rows):
                yield segment, next(offsets)


def _text(payload: bytes, segment: str, offset: int) -> str:
    """``payload`` as UTF-8 text; raises naming the event when it is not."""
    try:
        return payload.decode()
    except UnicodeDecodeError as error:
        msg = (
            f"the event at offset {offset} of segment {segment} is not UTF-8 text "
            f"({error.reason} at byte {error.start}); read it with deserializer 'bytes'"
        )
        raise InvalidArgumentError(msg) from None


def _timestamps(millis: list[int], kind: pa.DataType) -> pa.Array:
    """Epoch milliseconds as an Arrow timestamp array of ``kind`` (microseconds)."""
    return pa.array(np.fromiter(millis, np.int64, len(millis)) * 1000, kind)


def _watermark_row(watermark: int | None) -> dict[str, Any]:
    return {
        "routing_key": None,
        "event": None,
        "event_time": None,
        "watermark": None if watermark is None else watermark * 1000,
        "kind": KIND_WATERMARK,
        "segment": None,
        "offset": None,
        "ingestion_time": None,
    }


def _arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow form of the source schema, exactly as PySpark checks a task's batches against.

    PySpark's own conversion (timestamps in microseconds, UTC; nullability as
    declared), so the batches match whatever the installed PySpark expects.
    """
    return to_arrow_schema(schema, timezone="UTC")
