"""A test-only event-time operator: the largest value per key and tumbling window.

It stands for the aggregations of the seed's chained-aggregation example (a
window's highest valued element, which keeps its own timestamp). Spark's
workers cannot import this test package, so the Spark tests ship this module
by value (``cloudpickle.register_pickle_by_value``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

__all__ = ["OUTPUT", "window_max"]

#: The columns of :func:`window_max`'s result.
OUTPUT = (
    "routing_key string, window_start long, window_end long, value long, ts long, n long, "
    "late boolean"
)


def window_max(df: DataFrame, size_ms: int) -> DataFrame:
    """Per ``routing_key`` and window of ``size_ms``: the highest ``value``, its ``ts``, the count.

    ``df`` comes from :func:`spark_adapter.with_connector_watermark` and has a
    long column ``value``; times are epoch ms. As the helpers of
    :mod:`spark_adapter.event_time` do, a window comes out once, in the first
    micro-batch whose watermark ``W`` is at or past its end (``late`` false);
    an element whose window was over when it came (``end <= W``) comes out
    alone at once with ``late`` true. Nothing is dropped.
    """
    staged = df.select(
        "routing_key", "watermark", F.unix_millis("event_time").alias("t"), F.col("value")
    )
    return staged.groupBy("routing_key").applyInPandasWithState(
        _WindowMax(size_ms),
        outputStructType=OUTPUT,
        stateStructType="held string",
        outputMode="append",
        timeoutConf=GroupStateTimeout.EventTimeTimeout,
    )


class _WindowMax:
    """State: JSON ``{start: [value, ts, n]}`` of the open windows."""

    def __init__(self, size_ms: int):
        self.size = size_ms

    def __call__(
        self, key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        watermark = state.getCurrentWatermarkMs()
        held: dict[str, list[int]] = json.loads(state.get[0]) if state.exists else {}
        rows = []
        for batch in batches:
            for t, value in zip(batch["t"], batch["value"], strict=True):
                start = int(t) // self.size * self.size
                if start + self.size <= watermark:
                    rows.append((start, int(value), int(t), 1, True))
                    continue
                best = held.get(str(start))
                if best is None:
                    held[str(start)] = [int(value), int(t), 1]
                else:
                    if value > best[0]:
                        best[0], best[1] = int(value), int(t)
                    best[2] += 1
        for start in sorted((int(s) for s in held), key=int):
            if start + self.size <= watermark:
                value, t, n = held.pop(str(start))
                rows.append((start, value, t, n, False))
        if rows:
            yield pd.DataFrame(
                {
                    "routing_key": [key[0]] * len(rows),
                    "window_start": [r[0] for r in rows],
                    "window_end": [r[0] + self.size for r in rows],
                    "value": [r[1] for r in rows],
                    "ts": [r[2] for r in rows],
                    "n": [r[3] for r in rows],
                    "late": [r[4] for r in rows],
                }
            )
        if held:
            state.update((json.dumps(held),))
            state.setTimeoutTimestamp(min(int(s) for s in held) + self.size - 1)
        else:
            state.remove()
