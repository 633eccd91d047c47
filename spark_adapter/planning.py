"""Spark's offsets on the reader core's planner: options in, frontiers out as offset dicts.

Every rule of planning (start positions, budgets, oldest watermark first,
successors, the watermark) is the reader core's
(:mod:`connector.reader.planning`); this module only maps. A Spark offset is
a core :class:`~connector.reader.planning.Frontier` as a dict of plain,
nested values (:meth:`Frontier.to_dict`); offsets checkpointed by earlier
versions, whose parts were JSON strings, are still read.

Offsets do not depend on the batch before them unless a trigger limits the
batch: without ``maxEventsPerTrigger`` / ``maxBytesPerTrigger`` the next
end is everything in the streams now, so a restarted query plans from
Spark's checkpointed offsets alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connector.client.connection import StoreClient
from connector.reader.events import TimeDomain
from connector.reader.planning import (
    Frontier,
    advance_to_tail,
    advance_within_budget,
    frontier_at_cut,
    start_frontier,
)
from spark_adapter.admission import Budget
from spark_adapter.options import TidemarkOptions

__all__ = ["batch_end", "frontier_of", "lag_ms", "next_end", "offset_of", "start"]


def lag_ms(options: TidemarkOptions) -> int | None:
    """``maxEventTimeLag`` in ms, or None in the processing-time domain (no watermarks)."""
    if options.time_domain is TimeDomain.INGESTION_TIME:
        return options.max_event_time_lag_ms
    return None


def offset_of(frontier: Frontier) -> dict[str, Any]:
    """The Spark offset of ``frontier``: nested dicts, keys sorted (equal offsets, equal JSON)."""
    return frontier.to_dict()


def frontier_of(offset: Mapping[str, Any]) -> Frontier:
    """The frontier a Spark offset holds; reads the older JSON-in-strings form too."""
    return Frontier.from_dict(offset)


def start(client: StoreClient, options: TidemarkOptions) -> Frontier:
    """Where a read starts: ``startingStreamCut``."""
    return start_frontier(client, options.streams, options.starting_stream_cut, lag_ms(options))


def next_end(
    client: StoreClient, options: TidemarkOptions, previous: Frontier, budget: Budget | None = None
) -> Frontier:
    """The end of the micro-batch after ``previous``: within ``budget``, else the tail.

    ``budget`` is what Spark's read limit allows (:func:`spark_adapter.admission.budget_of`);
    without one, the trigger limits of ``options``.
    """
    if budget is None:
        budget = Budget(options.max_events_per_trigger, options.max_bytes_per_trigger)
    if budget.unlimited:
        return advance_to_tail(client, options.streams, previous, lag_ms(options))
    return advance_within_budget(
        client,
        previous,
        lag_ms(options),
        max_events=budget.max_events,
        max_bytes=budget.max_bytes,
    )


def batch_end(client: StoreClient, options: TidemarkOptions, begin: Frontier) -> Frontier:
    """Where a bounded read from ``begin`` ends: ``endingStreamCut``, by default the tail now."""
    ending = options.ending_stream_cut
    if ending is not None and ending.kind == "offsets":
        return frontier_at_cut(client, options.streams, ending.as_dict(), lag_ms(options))
    return advance_to_tail(client, options.streams, begin, lag_ms(options))
