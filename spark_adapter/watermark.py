"""Spark's event-time watermark made the connector's: one line before Spark's own operators.

:func:`event_time` is the one documented way: after it, a user's plain
Spark (``groupBy(window("event_time", ...))`` with any aggregate, sliding
and session windows, ``dropDuplicatesWithinWatermark``, stream-stream joins
with event-time bounds, ``transformWithStateInPandas`` with event-time
timers) runs on the connector's watermark. :func:`with_connector_watermark`
is the step it shares with the Python-path helpers
(:mod:`spark_adapter.ordering`, :mod:`spark_adapter.windows`).

How Spark computes its watermark (pyspark 4.3, ``WatermarkTracker``): each
``withWatermark`` puts one watermark operator in the plan; after each
micro-batch each operator that saw rows takes ``max(column) - delay``,
never lower than before, and the query's watermark is the least of them
(``spark.sql.streaming.multipleWatermarkPolicy`` = ``min``; an operator that
has seen no row counts as 0), applied from the next micro-batch on. The
stateful operators (aggregation, deduplication, join, ``transformWithState``)
take their event-time column from the column metadata ``withWatermark``
puts on it (``spark.watermarkDelayMs``), one column only.

So :func:`event_time` puts the one watermark operator on the source's
``watermark`` column (the connector's watermark, carried by one row per
micro-batch that reads events or whose watermark rose), drops that column
after it, and marks
``event_time`` as the event-time column with no delay of its own: Spark's
watermark is the connector's and nothing else, while its operators group,
close windows and judge lateness by each event's ``event_time``. A
``withWatermark("event_time", ...)`` added by habit puts a second operator
in the plan, and Spark's watermark becomes the lesser of the two: it then
stops when the writers stop, like a Kafka read's.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812

from connector.errors import InvalidArgumentError
from spark_adapter.schema import (
    EVENT_TIME,
    HAS_WATERMARKS_KEY,
    KIND,
    KIND_EVENT,
    KIND_WATERMARK,
    TIME_DOMAIN_KEY,
    WATERMARK,
    require_columns,
)

__all__ = ["DELAY_KEY", "event_time", "with_connector_watermark"]

#: The column metadata by which Spark knows a column carries the watermark (its delay in ms).
DELAY_KEY = "spark.watermarkDelayMs"


def event_time(readings: DataFrame) -> DataFrame:
    """``readings`` with Spark's watermark the connector's, for Spark's own event-time operators.

    ``readings`` is a streaming ``tidemark`` read in a time domain with
    watermarks (``timeDomain`` ``IngestionTime`` or ``EventTime``), as
    ``load()`` returns it. The result holds its event rows only, with every
    column but ``watermark``; ``event_time`` is the column Spark's operators
    take as event time. Spark's watermark after each micro-batch is the
    connector's as of that batch's end, in force from the next batch on, so:

    - a window (tumbling, sliding, session) comes out, in append mode, in the
      first micro-batch whose watermark is at or past its end, once;
    - each event's ``late`` column says whether its ``event_time`` is at or
      below the watermark its micro-batch runs with. Spark's operators drop
      a subset of those rows: an aggregation the (event, window) pairs
      whose window ended at or before the watermark of the micro-batch
      before; ``dropDuplicatesWithinWatermark``, a stream-stream join and
      ``transformWithStateInPandas`` in ``EventTime`` the rows whose
      ``event_time`` is at or below it. Each counts what it drops only in
      the query's progress (``stateOperators[].numRowsDroppedByWatermark``;
      an aggregation counts rows after its partial aggregation, one per key
      and window a task saw, not one per event). Route ``late`` rows to a
      sink of your own in the same query to keep them;
    - ``dropDuplicatesWithinWatermark`` keeps a key until the watermark
      passes its first event's time (no delay of its own).

    Call it right after ``load()``: a filter placed between ``load()`` and
    this call removes the watermark rows it does not match. Filters after
    it are safe (see :func:`with_connector_watermark`). Do not add
    ``withWatermark("event_time", ...)``: see the module docstring.

    Raises:
        InvalidArgumentError: a read whose ``timeDomain`` has no watermarks, a
            missing column (a frame that is not a ``tidemark`` read, or this
            function applied twice), or an ``event_time`` already watermarked.
    """
    require_columns(readings, KIND, WATERMARK, EVENT_TIME)
    if DELAY_KEY in readings.schema[EVENT_TIME].metadata:
        msg = (
            "event_time() makes the connector's watermark Spark's; 'event_time' already carries "
            "one of Spark's own (withWatermark('event_time', ...)), and Spark would keep the "
            "lesser of the two: drop that withWatermark"
        )
        raise InvalidArgumentError(msg)
    marked = with_connector_watermark(readings).drop(WATERMARK)
    return marked.withColumn(
        EVENT_TIME, F.col(EVENT_TIME).alias(EVENT_TIME, metadata={DELAY_KEY: 0})
    )


def with_connector_watermark(df: DataFrame) -> DataFrame:
    """Makes Spark's watermark follow the connector's ``watermark`` column; keeps event rows only.

    ``df`` is a streaming ``tidemark`` read (columns ``kind`` and ``watermark``)
    in a time domain with watermarks. Spark's watermark after each
    micro-batch becomes the highest ``watermark`` seen (no further delay: the
    connector already subtracted ``maxEventTimeLag``), including the
    ``watermark`` rows of batches without events; the result holds only the
    ``event`` rows, with ``watermark`` null.

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

    Raises:
        InvalidArgumentError: a missing column, or a read whose ``timeDomain``
            has no watermarks (naming it).
    """
    require_columns(df, KIND, WATERMARK)
    require_watermarks(df)
    kind = F.col(KIND)
    # Only watermark rows keep a value (see the docstring): event rows carry null.
    marks = df.withColumn(WATERMARK, F.when(kind == KIND_WATERMARK, F.col(WATERMARK)))
    keep_events = (kind == KIND_EVENT) | ((kind == KIND_WATERMARK) & F.col(WATERMARK).isNull())
    barrier = F.spark_partition_id() >= 0
    return marks.withWatermark(WATERMARK, "0 seconds").where(keep_events & barrier)


def require_watermarks(df: DataFrame) -> None:
    """Refuses a ``tidemark`` read whose time domain yields no watermarks.

    The source marks its ``watermark`` column with the read's ``timeDomain``
    (:func:`spark_adapter.schema.tidemark_schema`); a frame without the
    mark (not a ``tidemark`` read) passes.

    Raises:
        InvalidArgumentError: naming ``timeDomain``, its value and what to give instead.
    """
    metadata = df.schema[WATERMARK].metadata
    if metadata.get(HAS_WATERMARKS_KEY, True):
        return
    domain = metadata.get(TIME_DOMAIN_KEY)
    msg = (
        f"option 'timeDomain' is {domain!r}, which gives no watermarks: Spark's watermark "
        "would never move, so no window would ever close and no timer fire. Read with "
        ".option('timeDomain', 'IngestionTime') (the store's clock, less maxEventTimeLag) "
        "or 'EventTime' (the writers' assertions)"
    )
    raise InvalidArgumentError(msg)
