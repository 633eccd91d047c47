"""A host's view of its group's progress: the figures, and a log line once per stall.

The engines keep their groups' state themselves (Spark in its offsets, Flink
in its coordinator's state); :class:`ProgressWatch` asks the store, in a
fixed number of calls whatever the number of segments (its clock, the
tails in one ``DescribeTails``, the unread events in one ``PlanReads``),
for the figures of :mod:`connector.groups.progress`; on the tails a
planner described (a :class:`~connector.reader.tails.TailCache`) it asks
nothing more of the store than the unread events of the segments behind
their tails, so an idle engine's look costs no call, and looked at again
while no tail changed, a state it looked at last costs no look over its
segments either (only the clock's figures are made again). It logs what holds
the watermark (:func:`connector.groups.stall.why`) once per stall: when
the processing-time watermark has stood longer than ``stall_after_ms``,
once, and again only after it moved on. The CLI uses the same calls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from connector.client import StoreClient
from connector.errors import TidemarkError
from connector.groups.lag import GroupLag, state_lag
from connector.groups.progress import (
    DEFAULT_LARGE_DELAY_MS,
    GroupProgress,
    group_progress,
    writers_assert,
)
from connector.groups.record import GroupRecord
from connector.groups.stall import Stall, StoreTiming, event_time_segment, why
from connector.groups.state import GroupState, group_event_time, group_watermark
from connector.model import SegmentTail, WriterAssertion
from connector.names import StreamId
from connector.reader.tails import TailCache

__all__ = [
    "DEFAULT_STALL_LOG_AFTER_MS",
    "Look",
    "ProgressWatch",
    "look_at",
    "stall_of",
    "store_now",
    "stream_tails",
]

#: A processing-time watermark standing longer than this (ms) is a stall worth a log line.
DEFAULT_STALL_LOG_AFTER_MS = 60_000


def store_now(client: StoreClient, scope: str) -> int:
    """The store's ingestion clock now (epoch ms), as it stamps a state read."""
    return client.get_state(f"clock/{scope}/now").server_time


def stream_tails(client: StoreClient, streams: Iterable[str]) -> dict[str, SegmentTail]:
    """The tails of every segment of ``streams`` (``scope/stream``), by segment, in one call.

    Raises:
        TidemarkError: what describing one of them failed with (NotFoundError: it is gone).
    """
    tails: dict[str, SegmentTail] = {}
    for answer in client.describe_tails(sorted(set(streams))):
        if isinstance(answer, TidemarkError):
            raise answer
        tails.update((t.segment, t) for t in answer.segments)
    return tails


def stall_of(
    client: StoreClient,
    name: str,
    record: GroupRecord,
    lag: GroupLag,
    tails: Mapping[str, SegmentTail],
    timing: StoreTiming,
    now: int,
    host: str | None = None,
) -> Stall:
    """What holds the group's watermarks (:func:`why`), with the writers it needs asked for."""
    held = event_time_segment(record)
    writers: dict[str, Sequence[WriterAssertion]] = {}
    if held is not None:
        try:
            writers[held] = client.segment_info(held).writers
        except TidemarkError:  # gone while we looked: no writer to name
            pass
    return why(name, record, lag, tails, writers, timing, now, host=host)


@dataclass(frozen=True)
class Look:
    """One look at a group: its unread events per segment and its figures."""

    lag: GroupLag
    progress: GroupProgress


def look_at(
    client: StoreClient,
    state: GroupState,
    tails: Mapping[str, SegmentTail],
    now: int,
    large_after_ms: int = DEFAULT_LARGE_DELAY_MS,
    assignments: Mapping[str, str] | None = None,
) -> Look:
    """A group at ``state``: its unread events (one ``PlanReads``) and figures at ``now``."""
    lag = state_lag(state, assignments=assignments, plan_many=client.plan_reads)
    return _look(lag, state, tails, now, large_after_ms)


class _Times(NamedTuple):
    """What a group's figures take from its state and tails, besides the lag and the clock."""

    watermark: int
    event_time: int | None
    asserted: bool

    @classmethod
    def of(cls, state: GroupState, tails: Mapping[str, SegmentTail]) -> _Times:
        return cls(group_watermark(state), group_event_time(state), writers_assert(state, tails))


def _look(
    lag: GroupLag,
    state: GroupState,
    tails: Mapping[str, SegmentTail],
    now: int,
    large_after_ms: int = DEFAULT_LARGE_DELAY_MS,
    times: _Times | None = None,
) -> Look:
    times = times or _Times.of(state, tails)
    progress = group_progress(
        lag, times.watermark, times.event_time, now, large_after_ms, times.asserted
    )
    return Look(lag, progress)


class ProgressWatch:
    """The figures of a group an engine hosts (``host``, e.g. ``the Spark query``), looked at.

    Not thread-safe: one host thread looks. ``stall_after_ms`` <= 0 logs no stall.
    """

    def __init__(
        self,
        host: str,
        streams: Sequence[str],
        logger: logging.Logger,
        stall_after_ms: int = DEFAULT_STALL_LOG_AFTER_MS,
    ):
        self._host = host
        self._streams = tuple(streams)
        self._scope = StreamId.parse(self._streams[0]).scope if self._streams else ""
        self._log = logger
        self._after_ms = stall_after_ms
        self._logged = False  # this stall is logged
        self._last: tuple[int, GroupState, _Times] | None = None  # (tails' generation, state)

    def _times(self, state: GroupState, known: TailCache) -> _Times:
        """:meth:`_Times.of` ``state``, once per state object while no tail changes."""
        last = self._last
        if last is not None and last[0] == known.generation and last[1] is state:
            return last[2]
        times = _Times.of(state, known.described())
        self._last = (known.generation, state, times)
        return times

    def look(self, client: StoreClient, state: GroupState, known: TailCache | None = None) -> Look:
        """The group's figures at ``state`` now; logs the stall once if it stands too long.

        On ``known``, the tails a planner described last (and the store's
        clock then), when given: only segments behind their tails are asked.
        """
        if known is None:
            now = store_now(client, self._scope)
            tails = stream_tails(client, self._streams)
            look = look_at(client, state, tails, now)
        else:
            tails = known.described()
            now = known.server_time or store_now(client, self._scope)
            look = _look(known.lag(state), state, tails, now, times=self._times(state, known))
        lag, progress = look.lag, look.progress
        stalled = 0 < self._after_ms < progress.processing_time_delay_ms
        if stalled and not self._logged:
            record = GroupRecord(self._streams, 0, state)
            stall = stall_of(client, self._host, record, lag, tails, StoreTiming(), now, self._host)
            self._log.warning(
                "the watermark of %s has stood for %.1f s (%s): %s",
                self._host,
                progress.processing_time_delay_ms / 1000,
                progress.diagnosis.text,
                stall.text,
            )
        self._logged = stalled
        return look
