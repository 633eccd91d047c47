"""Windows of a ``tidemark`` stream, per key: counted in Python, or by Spark's own aggregation.

Both take a frame from :func:`~spark_adapter.watermark.with_connector_watermark`
(Spark's watermark follows the connector's):

- :func:`tumbling_window_count`: ``applyInPandasWithState`` with
  ``GroupStateTimeout.EventTimeTimeout``, per key in Python; keeps its
  promises in terms of Spark's watermark ``W`` of the micro-batch, the
  highest connector watermark of the batches before. An event that arrives
  when its window is over is counted in a row flagged ``late``: no event is
  left uncounted.
- :func:`window_count`: Spark's own ``groupBy(window(...)).count()`` in the
  JVM, no Python after the source; Spark drops late events and counts them
  in its progress only. For any other aggregate, sliding or session
  windows, write the plain Spark after :func:`~spark_adapter.watermark.event_time`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import BooleanType, LongType, StructField, StructType, TimestampType

from connector.errors import InvalidArgumentError
from connector.reader.source.timekeeping import is_late
from spark_adapter.options import parse_interval_ms
from spark_adapter.schema import EVENT_TIME, LATE, ROUTING_KEY, WATERMARK, require_columns
from spark_adapter.watermark import DELAY_KEY

__all__ = ["collapse_to_windows", "tumbling_window_count", "window_count"]

_ET_MS = "__tidemark_event_time_ms"
#: The pre-aggregated columns of tumbling_window_count: a window's start (ms) and its events.
_WINDOW_START_MS = "__tidemark_window_start_ms"
_EVENTS = "__tidemark_events"


# --- windows ------------------------------------------------------------------


def tumbling_window_count(
    df: DataFrame, window: str | timedelta, key_col: str = ROUTING_KEY
) -> DataFrame:
    """Counts each key's events per tumbling event-time window, emitted once the window is over.

    ``df`` comes from :func:`with_connector_watermark`. Windows are
    ``[start, start + window)`` with ``start`` a multiple of ``window`` since
    the epoch. Columns: ``key_col``, ``window_start``, ``window_end``,
    ``count`` (long), ``late`` (boolean), in append mode. With ``W`` Spark's
    watermark of the micro-batch:

    - a window's row (``late`` false) comes once, in the first micro-batch
      with ``W >= window_end``: no event still to come can fall in it;
    - an event that arrives when its window is over (``window_end <= W``) is
      counted in an extra row for that window with ``late`` true, in the
      micro-batch it arrives in (the window's own row may come in the same
      one); events with no event time are counted in a ``late`` row with null
      bounds. No event is left uncounted.

    Raises:
        InvalidArgumentError: for a bad ``window`` or a missing column.
    """
    require_columns(df, key_col, EVENT_TIME, WATERMARK)
    size = _window_ms(window)
    output = StructType(
        [
            StructField(key_col, df.schema[key_col].dataType, True),
            StructField("window_start", TimestampType(), True),
            StructField("window_end", TimestampType(), True),
            StructField("count", LongType(), False),
            StructField(LATE, BooleanType(), False),
        ]
    )
    staged = df.select(
        F.col(key_col), F.col(WATERMARK), F.unix_millis(F.col(EVENT_TIME)).alias(_ET_MS)
    )
    # Each Arrow batch collapses to one row per key and window before the shuffle, so the
    # per-key function sees a few rows per key, not every event. Spark's watermark is one
    # value for a whole micro-batch, so the events of one window in one micro-batch are all
    # on time or all late: counting them together decides exactly as counting one by one.
    collapsed_schema = StructType(
        [
            StructField(key_col, df.schema[key_col].dataType, True),
            StructField(WATERMARK, df.schema[WATERMARK].dataType, True),
            StructField(_WINDOW_START_MS, LongType(), True),
            StructField(_EVENTS, LongType(), False),
        ]
    )
    collapsed = staged.mapInArrow(_WindowCollapser(size, key_col), collapsed_schema)
    # Spark accepts an event-time timeout only while a column is marked as watermarked;
    # mapInArrow drops the mark, so it goes back on (it holds null: see
    # with_connector_watermark for why nulls keep every row).
    marked = collapsed.withColumn(
        WATERMARK, F.col(WATERMARK).alias(WATERMARK, metadata={DELAY_KEY: 0})
    )
    return marked.groupBy(key_col).applyInPandasWithState(
        _WindowCounter(size, key_col),
        outputStructType=output,
        stateStructType="counts string",
        outputMode="append",
        timeoutConf=GroupStateTimeout.EventTimeTimeout,
    )


# --- windows in the JVM ------------------------------------------------------------


def window_count(df: DataFrame, window: str | timedelta, key_col: str = ROUTING_KEY) -> DataFrame:
    """Counts each key's events per tumbling window with Spark's own aggregation, in the JVM.

    ``df`` comes from :func:`with_connector_watermark`. The plan is
    ``groupBy(window("event_time", window), key_col).count()`` in append mode:
    no Python runs after the source, and Spark's state store keeps the
    counts. Columns: ``key_col``, ``window_start``, ``window_end``, ``count``.

    Spark's watermark is the connector's (``with_connector_watermark``); the
    event-time column is only marked as watermarked (the metadata Spark's
    ``withWatermark`` puts on a column, with no delay of its own), so Spark
    accepts the append-mode aggregation and emits a window once the
    connector's watermark passes its end.

    Late events, unlike :func:`tumbling_window_count`: Spark judges an event
    late by the watermark of the micro-batch before its own (so an event
    whose window is still in the state store is counted in it), and drops
    a late event before its aggregation, counting it only in the query's
    progress (``stateOperators[].numRowsDroppedByWatermark``), not in the
    output; rows with no event time are filtered out by ``window``. A plan
    cannot divert late rows before the aggregation to count them as rows:
    Spark has no expression for the watermark of the running micro-batch.
    Use :func:`tumbling_window_count` where every late event must come out.

    Raises:
        InvalidArgumentError: for a bad ``window`` or a missing column.
    """
    require_columns(df, key_col, EVENT_TIME, WATERMARK)
    size = _window_ms(window)
    marked = df.withColumn(EVENT_TIME, F.col(EVENT_TIME).alias(EVENT_TIME, metadata={DELAY_KEY: 0}))
    counts = marked.groupBy(F.window(EVENT_TIME, f"{size} milliseconds"), key_col).count()
    return counts.select(
        F.col(key_col),
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        F.col("count"),
    )


def _window_ms(window: str | timedelta) -> int:
    if isinstance(window, timedelta):
        size = window // timedelta(milliseconds=1)
    else:
        size = parse_interval_ms(window, "window")
    if size <= 0:
        msg = f"window must be longer than 0 ms, got {window!r}"
        raise InvalidArgumentError(msg)
    return size


def collapse_to_windows(batch: pa.RecordBatch, size_ms: int, key_col: str) -> pa.RecordBatch:
    """One row per ``(key_col, window start)`` of ``batch``: the start (ms) and its events.

    ``batch`` has ``key_col``, ``watermark`` and the event time in ms; the
    start is the event time floored to a multiple of ``size_ms`` (null for an
    event with no time: those collapse to one null-start row per key). The
    counts add up to ``batch.num_rows``; ``watermark`` is null in every row.
    """
    times = batch.column(_ET_MS)
    known = pc.fill_null(times, 0).to_numpy(zero_copy_only=False)
    unknown = pc.is_null(times).to_numpy(zero_copy_only=False)
    starts = pa.array((known // size_ms) * size_ms, pa.int64(), mask=unknown)
    table = pa.table(
        {
            key_col: batch.column(key_col),
            _WINDOW_START_MS: starts,
            _EVENTS: pa.array(np.ones(batch.num_rows, dtype=np.int64)),
        }
    )
    grouped = table.group_by([key_col, _WINDOW_START_MS], use_threads=False).aggregate(
        [(_EVENTS, "sum")]
    )
    return pa.RecordBatch.from_arrays(
        [
            grouped.column(key_col).combine_chunks(),
            pa.nulls(grouped.num_rows, batch.schema.field(WATERMARK).type),
            grouped.column(_WINDOW_START_MS).combine_chunks(),
            grouped.column(f"{_EVENTS}_sum").combine_chunks(),
        ],
        names=[key_col, WATERMARK, _WINDOW_START_MS, _EVENTS],
    )


class _WindowCollapser:
    """The ``mapInArrow`` function of :func:`tumbling_window_count`: each batch collapsed."""

    def __init__(self, size_ms: int, key_col: str):
        self.size = size_ms
        self.key_col = key_col

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                yield collapse_to_windows(batch, self.size, self.key_col)


class _WindowCounter:
    """The per-key function of :func:`tumbling_window_count`; state is JSON ``{start: count}``.

    Its input is :func:`collapse_to_windows`' rows: a window start (null for
    events with no time) and how many events fell in it.
    """

    def __init__(self, size_ms: int, key_col: str):
        self.size = size_ms
        self.key_col = key_col

    def __call__(
        self, key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        watermark = state.getCurrentWatermarkMs()
        counts: dict[int, int] = (
            {int(s): c for s, c in json.loads(state.get[0]).items()} if state.exists else {}
        )
        late: dict[int | None, int] = {}
        frames = [batch for batch in batches if len(batch)]
        collapsed = pd.concat(frames) if frames else None
        if collapsed is not None:
            events = collapsed.groupby(_WINDOW_START_MS, dropna=False)[_EVENTS].sum()
            for start_value, n in events.items():
                if pd.isna(start_value):
                    late[None] = late.get(None, 0) + int(n)
                    continue
                start = int(start_value)
                # A window is closed once its end is at or below the watermark: late for it.
                target = late if is_late(start + self.size, watermark) else counts
                target[start] = target.get(start, 0) + int(n)
        closed = sorted(s for s in counts if is_late(s + self.size, watermark))
        rows = [(s, counts.pop(s), False) for s in closed]
        rows += [(s, n, True) for s, n in sorted(late.items(), key=_none_first)]
        if rows:
            yield self._frame(key[0], rows)
        if counts:
            state.update((json.dumps({str(s): c for s, c in counts.items()}),))
            state.setTimeoutTimestamp(max(1, min(counts) + self.size - 1))
        else:
            state.remove()

    def _frame(self, key: Any, rows: list[tuple[int | None, int, bool]]) -> pd.DataFrame:
        def at(ms: int | None) -> pd.Timestamp | None:
            return None if ms is None else pd.Timestamp(ms, unit="ms", tz="UTC")

        return pd.DataFrame(
            {
                self.key_col: [key] * len(rows),
                "window_start": [at(s) for s, _, _ in rows],
                "window_end": [at(None if s is None else s + self.size) for s, _, _ in rows],
                "count": [n for _, n, _ in rows],
                LATE: [flag for _, _, flag in rows],
            }
        )


def _none_first(item: tuple[int | None, int]) -> tuple[bool, int]:
    return (item[0] is not None, item[0] or 0)
