"""What the store says of a group's work from its positions, for percentile watermarks.

One :meth:`~connector.client.connection.StoreClient.plan_reads` call asks
every unfinished segment's :class:`~connector.model.UnreadWork` (readable
ones from the group's position, waiting successors from their start); the
rule over it is :mod:`connector.groups.percentile`, applied by
:class:`~connector.reader.source.timekeeping.TimeKeeping`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from connector.client.connection import StoreClient
from connector.errors import TidemarkError
from connector.groups.state import GroupState
from connector.model import PlanRequest, UnreadWork

__all__ = ["WORK_BUCKETS", "group_work", "work_by_segment"]

_log = logging.getLogger(__name__)

#: Buckets asked of each segment's distributions: the rule's resolution is 1/64 of a segment.
WORK_BUCKETS = 64

#: The most plans one call carries (the server's MAX_ITEMS_PER_CALL).
_PER_CALL = 16_384


def group_work(
    client: StoreClient, state: GroupState, offsets: Mapping[str, int] | None = None
) -> list[UnreadWork] | None:
    """The work of every unfinished segment of ``state``, or None when one's is not told.

    ``offsets`` gives newer positions of some readable segments (a
    reader's own) than the state's. None (a segment truncated, deleted or
    not reachable): the caller keeps the perfect watermark.
    """
    work = work_by_segment(client, state, offsets)
    return None if work is None else list(work.values())


def work_by_segment(
    client: StoreClient, state: GroupState, offsets: Mapping[str, int] | None = None
) -> dict[str, UnreadWork] | None:
    """:func:`group_work` by segment name."""
    newer = offsets or {}
    plans = [
        PlanRequest(s, newer.get(s, c.offset), max_events=1, work_buckets=WORK_BUCKETS)
        for s, c in state.cursors.items()
    ]
    plans += [PlanRequest(s, 0, max_events=1, work_buckets=WORK_BUCKETS) for s in state.waiting]
    work: dict[str, UnreadWork] = {}
    try:
        for at in range(0, len(plans), _PER_CALL):
            chunk = plans[at : at + _PER_CALL]
            for plan, planned in zip(chunk, client.plan_reads(chunk), strict=True):
                if isinstance(planned, TidemarkError) or planned.work is None:
                    _log.debug("no work told for a segment: %s", planned)
                    return None
                work[plan.segment] = planned.work
    except TidemarkError as error:
        _log.debug("no work told: %s", error)
        return None
    return work
