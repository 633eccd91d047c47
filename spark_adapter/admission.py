"""Admission control of the ``tidemark`` source: Spark's read limits in, the core's budget out.

- :func:`default_read_limit`: what the source tells Spark it limits each
  micro-batch to, from ``maxEventsPerTrigger`` (``ReadMaxRows``) or else
  ``maxBytesPerTrigger`` (``ReadMaxBytes``); ``ReadAllAvailable`` without.
- :func:`budget_of`: the limit Spark passes to ``latestOffset(start, limit)``
  as the reader core's :class:`~connector.reader.source.Budget`. Spark
  passes ``ReadAllAvailable`` when its trigger wants everything
  (``Trigger.Once``, and ``processAllAvailable``'s last batches may), and
  the source must then ignore its own options; with the default limit both
  options apply, so setting both bounds each batch by both.

``Trigger.AvailableNow`` needs nothing here: the reader core clips each
batch's end to the streams' tails when the query started
(:meth:`~connector.reader.source.Frontier.clipped_to`).
"""

from __future__ import annotations

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
)

from connector.errors import InvalidArgumentError
from connector.reader.source import Budget, ReadSpec

__all__ = ["budget_of", "default_read_limit"]


def default_read_limit(spec: ReadSpec) -> ReadLimit:
    """The limit the options ask for; Spark passes it back to ``latestOffset`` each batch."""
    if spec.budget.max_events is not None:
        return ReadMaxRows(spec.budget.max_events)
    if spec.budget.max_bytes is not None:
        return ReadMaxBytes(spec.budget.max_bytes)
    return ReadAllAvailable()


def budget_of(limit: ReadLimit, spec: ReadSpec) -> Budget:
    """The budget of a micro-batch under ``limit``, as Spark passed it to ``latestOffset``.

    Raises:
        InvalidArgumentError: for a limit this source cannot keep (``ReadMinRows``,
            ``ReadMaxFiles``), naming it.
    """
    if isinstance(limit, ReadAllAvailable):
        return Budget()
    if isinstance(limit, ReadMaxRows):
        return Budget(limit.max_rows, spec.budget.max_bytes)
    if isinstance(limit, ReadMaxBytes):
        return Budget(spec.budget.max_events, limit.max_bytes)
    msg = f"the tidemark source cannot keep the read limit {limit!r}"
    raise InvalidArgumentError(msg)
