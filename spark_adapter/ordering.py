"""Each key's events in event-time order, released as Spark's watermark passes them.

:func:`order_by_event_time` (and :func:`split_late`) take a frame from
:func:`~spark_adapter.watermark.with_connector_watermark` and run per key in
Python: ``applyInPandasWithState`` with ``GroupStateTimeout.EventTimeTimeout``.
They keep their promises in terms of Spark's watermark ``W`` of the
micro-batch, the highest connector watermark of the batches before. An
event is *late* when its event time is ``<= W`` when it arrives. Late
events are never dropped: they come out flagged.

Why not ``transformWithStateInPandas`` here (looked at on PySpark 4.3, not
measured): it keeps the same per-key Python work and puts the state in the
JVM, so every state or timer call of the Python worker is a round trip over
a local socket (protobuf messages); and Spark runs it only on the RocksDB
state store (``STORE_BACKEND_NOT_SUPPORTED_FOR_TWS`` otherwise), a
session-wide setting a library cannot make for its users and an existing
checkpoint cannot change. A user's own ``transformWithStateInPandas`` runs
on the connector's watermark after :func:`~spark_adapter.watermark.event_time`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import BooleanType, StructField, StructType

from connector.reader.source.timekeeping import is_late
from spark_adapter.schema import EVENT_TIME, LATE, ROUTING_KEY, require_columns

__all__ = ["order_by_event_time", "split_late"]

_ET_MS = "__tidemark_event_time_ms"


def order_by_event_time(df: DataFrame, key_col: str = ROUTING_KEY) -> DataFrame:
    """Each key's events in event-time order, released as Spark's watermark passes them.

    ``df`` comes from :func:`~spark_adapter.watermark.with_connector_watermark`
    (it must carry Spark's watermark). The result has ``df``'s columns, with
    ``late`` (boolean) last in place of the source's own (the same rule, also
    for events with no event time), in append mode. Per key, with ``W``
    Spark's watermark of the micro-batch:

    - an event with event time ``> W`` is held until ``W`` reaches its event
      time, then emitted with ``late`` false; the events of a key emitted with
      ``late`` false have non-decreasing event times (ties keep arrival order);
    - an event with event time ``<= W`` on arrival, or with no event time, is
      emitted at once with ``late`` true;
    - nothing is dropped; held events live in Spark's state store (so in the
      checkpoint) until released.

    Raises:
        InvalidArgumentError: when a needed column is missing.
    """
    require_columns(df, key_col, EVENT_TIME)
    df = df.drop(LATE)
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
    require_columns(ordered, LATE)
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
