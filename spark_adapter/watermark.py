"""Spark's event-time watermark made the connector's.

:func:`with_connector_watermark` is the step every event-time helper takes
first (:mod:`spark_adapter.ordering`, :mod:`spark_adapter.windows`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812

from spark_adapter.schema import KIND, KIND_EVENT, KIND_WATERMARK, WATERMARK, require_columns

__all__ = ["DELAY_KEY", "with_connector_watermark"]

#: The column metadata by which Spark knows a column carries the watermark (its delay in ms).
DELAY_KEY = "spark.watermarkDelayMs"


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

    Why the filter looks odd: Spark's optimizer merges the filters written
    after it with it, then pushes every part that does not read the
    watermark column below ``withWatermark``, where it would drop the
    watermark rows (their event columns are null) and Spark's watermark
    would stand still (measured with pyspark 4.1 and 4.3: a plain
    ``kind = 'event'`` filter, or a user's ``routing_key <> 'x'`` after it,
    kept Spark's watermark at 0 or at the last event's). The filter reads
    ``watermark`` (a watermark row always has one, so its second term is
    never true), and a term that is always true but not deterministic
    (``spark_partition_id() >= 0``) stops the optimizer from merging later
    filters into it or moving them below it.
    """
    require_columns(df, KIND, WATERMARK)
    kind = F.col(KIND)
    # Only watermark rows keep a value (see the docstring): event rows carry null.
    marks = df.withColumn(WATERMARK, F.when(kind == KIND_WATERMARK, F.col(WATERMARK)))
    keep_events = (kind == KIND_EVENT) | ((kind == KIND_WATERMARK) & F.col(WATERMARK).isNull())
    barrier = F.spark_partition_id() >= 0
    return marks.withWatermark(WATERMARK, "0 seconds").where(keep_events & barrier)
