"""How many late events a Spark query reads, as Spark's own observed metrics.

A percentile watermark (``watermarkPercentile`` p below 1) lets the watermark
pass a share of the unread work, whose events then come out ``late``. The
share to check against ``1 - p`` is what the query saw: :func:`observe_late`
counts it in each micro-batch with ``DataFrame.observe``, so the counts come
with the query's progress (``query.lastProgress["observedMetrics"]``, and
every ``StreamingQueryListener``), beside Spark's own figures.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812

from spark_adapter.schema import KIND, KIND_EVENT, LATE, require_columns

__all__ = ["LATE_METRICS", "observe_late"]

#: The observation's name in ``observedMetrics`` unless told another.
LATE_METRICS = "tidemark_late"


def observe_late(df: DataFrame, name: str = LATE_METRICS) -> DataFrame:
    """``df`` unchanged; each micro-batch's ``events`` and ``late_events`` observed as ``name``.

    ``df`` is a ``tidemark`` read as ``load()`` returns it (its watermark rows
    are not counted) or after :func:`spark_adapter.event_time`. Observe
    before any operator that drops late rows (an aggregation, a join): what
    is observed is what reaches this point of the plan. Each micro-batch's
    progress then holds ``observedMetrics[name]`` = ``{"events": n,
    "late_events": k}``; ``k / n`` over the run is the observed late
    fraction (the glossary's "late fraction"). ``name`` must be unique in
    the query (Spark refuses two observations of one name).

    Raises:
        InvalidArgumentError: ``df`` has no ``late`` column (it is not a
            ``tidemark`` read).
    """
    require_columns(df, LATE)
    event = F.col(KIND) == KIND_EVENT if KIND in df.columns else F.lit(True)
    return df.observe(
        name,
        F.count(F.when(event, 1)).alias("events"),
        F.count(F.when(event & F.col(LATE), 1)).alias("late_events"),
    )
