"""Admission control of the ``tidemark`` source: Spark's read limits in, the planner's budget out.

- :func:`default_read_limit`: what the source tells Spark it limits each
  micro-batch to, from ``maxEventsPerTrigger`` (``ReadMaxRows``) or else
  ``maxBytesPerTrigger`` (``ReadMaxBytes``); ``ReadAllAvailable`` without.
- :func:`budget_of`: the limit Spark passes to ``latestOffset(start, limit)``
  as a :class:`Budget`. Spark passes ``ReadAllAvailable`` when its trigger
  wants everything (``Trigger.Once``, and ``processAllAvailable``'s last
  batches may), and the source must then ignore its own options; with the
  default limit both options apply, so setting both bounds each batch by
  both.
- :class:`AvailableNowTarget`: for ``Trigger.AvailableNow``, what was in the
  streams when Spark prepared the query (every open segment's tail and
  watermark then). Batches never plan past it, so the query ends; the last
  batches carry the target's watermark, so windows it closes are emitted
  before the query stops.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
)

from connector.errors import InvalidArgumentError
from connector.reader.planning import Frontier
from spark_adapter.options import TidemarkOptions

__all__ = ["AvailableNowTarget", "Budget", "budget_of", "default_read_limit"]


@dataclass(frozen=True)
class Budget:
    """At most ``max_events`` events and ``max_bytes`` bytes in one micro-batch (None: no limit)."""

    max_events: int | None = None
    max_bytes: int | None = None

    @property
    def unlimited(self) -> bool:
        """Whether the batch may read everything there is."""
        return self.max_events is None and self.max_bytes is None


def default_read_limit(options: TidemarkOptions) -> ReadLimit:
    """The limit the options ask for; Spark passes it back to ``latestOffset`` each batch."""
    if options.max_events_per_trigger is not None:
        return ReadMaxRows(options.max_events_per_trigger)
    if options.max_bytes_per_trigger is not None:
        return ReadMaxBytes(options.max_bytes_per_trigger)
    return ReadAllAvailable()


def budget_of(limit: ReadLimit, options: TidemarkOptions) -> Budget:
    """The budget of a micro-batch under ``limit``, as Spark passed it to ``latestOffset``.

    Raises:
        InvalidArgumentError: for a limit this source cannot keep (``ReadMinRows``,
            ``ReadMaxFiles``), naming it.
    """
    if isinstance(limit, ReadAllAvailable):
        return Budget()
    if isinstance(limit, ReadMaxRows):
        return Budget(limit.max_rows, options.max_bytes_per_trigger)
    if isinstance(limit, ReadMaxBytes):
        return Budget(options.max_events_per_trigger, limit.max_bytes)
    msg = f"the tidemark source cannot keep the read limit {limit!r}"
    raise InvalidArgumentError(msg)


@dataclass(frozen=True)
class AvailableNowTarget:
    """The streams as they were when ``Trigger.AvailableNow`` prepared the query.

    ``tail`` is the planner's frontier at every open segment's tail then (its
    sealed segments finished), planned from the query's starting frontier.
    """

    tail: Frontier

    def contains(self, end: Frontier) -> bool:
        """Whether ``end`` reads nothing written after the target was taken."""
        tail = self.tail.state
        if not end.state.finished <= tail.finished:
            return False  # a segment sealed since, read to its seal
        for segment, cursor in end.state.cursors.items():
            target = tail.cursors.get(segment)
            if target is None:
                if segment not in tail.finished:
                    return False  # a successor created since
            elif cursor.offset > target.offset:
                return False
        return True

    def end_from(self, begin: Frontier) -> Frontier:
        """The target as the end of a batch starting at ``begin`` (at or before it).

        What ``advance_to_tail`` would have returned from ``begin`` when the
        target was taken: segments ``begin`` finished stay finished and are
        not read; the watermark never steps back.
        """
        tail = self.tail
        finished = tail.state.finished | begin.state.finished
        cursors = {
            segment: cursor
            for segment, cursor in tail.state.cursors.items()
            if segment not in begin.state.finished
        }
        state = replace(tail.state, cursors=cursors, finished=finished)
        watermarks = [w for w in (begin.watermark, tail.watermark) if w is not None]
        return Frontier(state, {**tail.ends, **begin.ends}, max(watermarks) if watermarks else None)
