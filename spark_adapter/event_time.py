"""Event-time helpers for a ``tidemark`` stream: ordering, late split, tumbling windows.

The chain: :func:`with_connector_watermark` first (Spark's watermark follows
the connector's), then one of

- :func:`order_by_event_time` (and :func:`split_late`) or
  :func:`tumbling_window_count`: ``applyInPandasWithState`` with
  ``GroupStateTimeout.EventTimeTimeout``, per key in Python. Both keep their
  promises in terms of Spark's watermark ``W`` of the micro-batch, the
  highest connector watermark of the batches before. An event is *late*
  when its event time is ``<= W`` when it arrives. Late events are never
  dropped: they come out flagged.
- :func:`window_count`: Spark's own ``groupBy(window(...)).count()`` in the
  JVM, no Python after the source; Spark drops late events and counts them
  in its progress only.

Why not ``transformWithStateInPandas`` (usable with PySpark 4.2+ and
protobuf 6.33+; looked at on PySpark 4.3, not measured here): it keeps the
same per-key Python work and puts the state in the JVM, so every state or
timer call of the Python worker is a round trip over a local socket
(protobuf messages); and Spark runs it only on the RocksDB state store
(``STORE_BACKEND_NOT_SUPPORTED_FOR_TWS`` otherwise), a session-wide setting
a library cannot make for its users and an existing checkpoint cannot
change. Ordering would read more plainly with a list state and event-time
timers, but not run faster; where speed matters :func:`window_count` takes
Python out of the window altogether.
"""

from __future__ import annotations

import io
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
from spark_adapter.schema import (
    EVENT_TIME,
    KIND,
    KIND_EVENT,
    KIND_WATERMARK,
    ROUTING_KEY,
    WATERMARK,
)

__all__ = [
    "LATE",
    "order_by_event_time",
    "split_late",
    "tumbling_window_count",
    "window_count",
    "with_connector_watermark",
]

#: The boolean column the helpers add: whether the row reports late events.
LATE = "late"
_ET_MS = "__tidemark_event_time_ms"
#: The pre-aggregated columns of tumbling_window_count: a window's start (ms) and its events.
_WINDOW_START_MS = "__tidemark_window_start_ms"
_EVENTS = "__tidemark_events"
#: The column metadata by which Spark knows a column carries the watermark (its delay in ms).
_DELAY_KEY = "spark.watermarkDelayMs"


def with_connector_watermark(df: DataFrame) -> DataFrame:
    """Makes Spark's watermark follow the connector's ``watermark`` column; keeps event rows only.

    ``df`` is a streaming ``tidemark`` read (columns ``kind`` and ``watermark``).
    Spark's watermark after each micro-batch becomes the highest ``watermark``
    seen (no further delay: the connector already subtracted
    ``maxEventTimeLag``), including the ``watermark`` rows of batches without
    events; the result holds only the ``event`` rows, with ``watermark`` null.

    Why event rows lose their ``watermark``: a stateful operator downstream
    (``applyInPandasWithState`` with an event-time timeout, an aggregation)
    silently drops every input row whose watermarked column is at or below
    Spark's watermark of the batch before. While the connector's watermark
    stands still (an idle segment not yet ticked), consecutive batches carry
    the same value, and their event rows were dropped (measured with pyspark
    4.1.4: of five batches at one watermark, only the first one's event came
    out). A null is never below anything; a batch whose watermark rose always
    has a ``watermark`` row, so Spark's watermark moves exactly as before.

    Why the filter looks odd: Spark's optimizer pushes a filter below
    ``withWatermark`` when the filter does not read the watermark column, and
    then the watermark rows never reach the watermark operator (measured with
    pyspark 4.1: a plain ``kind = 'event'`` filter kept Spark's watermark at
    the last event's). The filter here also reads ``watermark`` (a watermark
    row always has one, so the second term is never true) and stays above.
    """
    _require(df, KIND, WATERMARK)
    kind = F.col(KIND)
    # Only watermark rows keep a value (see the docstring): event rows carry null.
    marks = df.withColumn(WATERMARK, F.when(kind == KIND_WATERMARK, F.col(WATERMARK)))
    keep_events = (kind == KIND_EVENT) | ((kind == KIND_WATERMARK) & F.col(WATERMARK).isNull())
    return marks.withWatermark(WATERMARK, "0 seconds").where(keep_events)


# --- ordering -----------------------------------------------------------------


def order_by_event_time(df: DataFrame, key_col: str = ROUTING_KEY) -> DataFrame:
    """Each key's events in event-time order, released as Spark's watermark passes them.

    ``df`` comes from :func:`with_connector_watermark` (it must carry Spark's
    watermark). The result has ``df``'s columns plus ``late`` (boolean), in
    append mode. Per key, with ``W`` Spark's watermark of the micro-batch:

    - an event with event time ``> W`` is held until ``W`` reaches its event
      time, then emitted with ``late`` false; the events of a key emitted with
      ``late`` false have non-decreasing event times (ties keep arrival order);
    - an event with event time ``<= W`` on arrival, or with no event time, is
      emitted at once with ``late`` true;
    - nothing is dropped; held events live in Spark's state store (so in the
      checkpoint) until released.

    Raises:
        InvalidArgumentError: when a needed column is missing or ``late`` exists.
    """
    _require(df, key_col, EVENT_TIME)
    if LATE in df.columns:
        msg = f"order_by_event_time adds column {LATE!r}, which {df.columns!r} has already"
        raise InvalidArgumentError(msg)
    output = StructType([*df.schema.fields, StructField(LATE, BooleanType(), False)])
    staged = df.withColumn(_ET_MS, F.unix_millis(F.col(EVENT_TIME)))
    return staged.groupBy(key_col).applyInPandasWithState(
        _EventTimeOrderer(df.columns),
        outputStructType=output,
        stateStructType="held binary",
        outputMode="append",
        timeoutConf=GroupStateTimeout.EventTimeTimeout,
    )


def split_late(ordered: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``(on_time, late)``: the output of :func:`order_by_event_time` split on ``late``.

    Both drop the ``late`` column. Each is a separate streaming plan: two
    sinks run the ordering twice, in two queries; to run it once, write
    ``ordered`` with ``foreachBatch`` and split each batch there.
    """
    _require(ordered, LATE)
    late = F.col(LATE)
    return ordered.where(~late).drop(LATE), ordered.where(late).drop(LATE)


class _EventTimeOrderer:
    """The per-key function of :func:`order_by_event_time`; held events are Arrow IPC bytes."""

    def __init__(self, columns: list[str]):
        self.columns = columns

    def __call__(
        self, key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        watermark = state.getCurrentWatermarkMs()
        held = _decode(state.get[0]) if state.exists else None
        arrived = [batch for batch in batches if len(batch)]
        frames = [frame for frame in (held, *arrived) if frame is not None and len(frame)]
        pending = pd.concat(frames, ignore_index=True) if frames else None
        if pending is None:
            state.remove()
            return
        times = pending[_ET_MS]
        fresh = pd.Series(
            pending.index >= (len(held) if held is not None else 0), index=pending.index
        )
        # Held events were on time when they came, so only fresh ones can be late;
        # fresh on-time ones are after the watermark, so only held ones can be due.
        passed = is_late(times, watermark)  # at or below the watermark
        late = fresh & (times.isna() | passed)
        due = ~fresh & passed
        keep = ~late & ~due
        released = pending[due].sort_values(_ET_MS, kind="stable")
        if len(released):
            yield self._rows(released, late=False)
        if late.any():
            yield self._rows(pending[late], late=True)
        kept = pending[keep]
        if len(kept):
            state.update((_encode(kept),))
            state.setTimeoutTimestamp(max(1, int(kept[_ET_MS].min()) - 1))
        else:
            state.remove()

    def _rows(self, frame: pd.DataFrame, late: bool) -> pd.DataFrame:
        out = frame[self.columns].copy()
        out[LATE] = late
        return out


def _encode(frame: pd.DataFrame) -> bytes:
    import pyarrow as pa

    table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _decode(data: bytes) -> pd.DataFrame:
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(data)).read_all().to_pandas()


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
    _require(df, key_col, EVENT_TIME, WATERMARK)
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
        WATERMARK, F.col(WATERMARK).alias(WATERMARK, metadata={_DELAY_KEY: 0})
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
    _require(df, key_col, EVENT_TIME, WATERMARK)
    size = _window_ms(window)
    # window() filters out rows with a null time; on event_time alone the optimizer pushes
    # that filter below withWatermark, where it would drop the watermark rows too (their
    # event_time is null) and Spark's watermark would never move. Reading `watermark` (null
    # on every event row) keeps the filter above, as with_connector_watermark's own does.
    time = F.coalesce(F.col(EVENT_TIME), F.col(WATERMARK))
    marked = df.withColumn(EVENT_TIME, time.alias(EVENT_TIME, metadata={_DELAY_KEY: 0}))
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


def _require(df: DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        msg = f"the DataFrame has no column {missing[0]!r}; it has {df.columns!r}"
        raise InvalidArgumentError(msg)
