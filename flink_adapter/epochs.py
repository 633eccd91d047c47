"""One coordinator epoch: plan read tasks with the core planner, and say the epoch's watermark.

Pure functions over a :class:`~connector.reader.planning.Frontier` and a store
client; the Flink coordinator calls :func:`plan_epoch` once per tick and keeps
the frontier it returns in its keyed state. Nothing here knows Flink, so it is
tested against a real store alone.

An epoch's records, in the order the coordinator emits them:

- the :class:`ReadTask` values of each lineage chain of the epoch's ranges
  (segments related by scaling share a chain, read in order by one reader
  subtask), each a piece of at most so many events and bytes: PyFlink hands a
  function's output for one input to the JVM only once that input is done,
  so a task's size bounds how long its events wait in the reader;
- then one :class:`EpochEnd` carrying the epoch's event-time watermark
  ``W_e`` (the frontier's: group watermark less the lag, only when it rose).

Every task carries the watermark in force while it is read (the previous
epoch's), so a reader flags an event late exactly when its event time is at
or below it: the same answer at any parallelism, and after a restore.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from connector.client.connection import StoreClient
from connector.reader.lineage import KnownSegments, lineage_lane
from connector.reader.planning import (
    Frontier,
    SegmentRange,
    advance_to_tail,
    advance_within_budget,
    chains_of,
    ranges_between,
    split_range,
)

__all__ = [
    "MAX_EPOCH_BYTES",
    "MAX_EPOCH_EVENTS",
    "MAX_TASK_BYTES",
    "MAX_TASK_EVENTS",
    "EpochEnd",
    "EpochPlan",
    "ReadTask",
    "decode_record",
    "plan_epoch",
    "tasks_between",
]

#: The most events one epoch reads, by default.
MAX_EPOCH_EVENTS = 100_000
#: The most bytes one epoch reads, by default.
MAX_EPOCH_BYTES = 64 * 1024 * 1024
#: The most events one read task holds, by default.
MAX_TASK_EVENTS = 1_000
#: The most bytes one read task holds, by default (a larger event is a task of its own).
MAX_TASK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ReadTask:
    """Ranges one reader subtask reads in order (one lineage chain).

    Attributes:
        epoch: the epoch that planned it.
        index: its lineage's lane (:func:`~connector.reader.lineage.lineage_lane`),
            the same in every epoch; subtask ``index % parallelism`` reads it, so
            one segment is read by one subtask in every epoch and a key's events
            are not overtaken by that key's events of the next epoch.
        ranges: ``(segment, start, stop)`` byte ranges of whole events, in read order.
        watermark_in_force: the last watermark emitted before this epoch, or None.
    """

    epoch: int
    index: int
    ranges: tuple[tuple[str, int, int], ...]
    watermark_in_force: int | None

    def encode(self) -> str:
        """The task as the JSON text the coordinator sends its readers."""
        return json.dumps(
            {
                "t": "task",
                "e": self.epoch,
                "i": self.index,
                "r": self.ranges,
                "w": self.watermark_in_force,
            },
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class EpochEnd:
    """The end of an epoch: every reader subtask emits ``watermark`` (when not None) on it."""

    epoch: int
    watermark: int | None

    def encode(self) -> str:
        """The end record as JSON text."""
        return json.dumps({"t": "end", "e": self.epoch, "w": self.watermark}, separators=(",", ":"))


def decode_record(text: str) -> ReadTask | EpochEnd:
    """A coordinator record from its JSON text."""
    data = json.loads(text)
    if data["t"] == "task":
        ranges = tuple((str(s), int(a), int(b)) for s, a, b in data["r"])
        return ReadTask(int(data["e"]), int(data["i"]), ranges, data["w"])
    return EpochEnd(int(data["e"]), data["w"])


@dataclass(frozen=True)
class EpochPlan:
    """What one epoch reads and the frontier after it."""

    frontier: Frontier
    tasks: tuple[ReadTask, ...]
    end: EpochEnd

    @property
    def events_planned(self) -> bool:
        """Whether the epoch reads anything."""
        return bool(self.tasks)


def plan_epoch(
    client: StoreClient,
    streams: Sequence[str],
    previous: Frontier,
    epoch: int,
    lag_ms: int | None,
    *,
    max_events: int | None = None,
    max_bytes: int | None = None,
    max_task_events: int | None = MAX_TASK_EVENTS,
    max_task_bytes: int | None = MAX_TASK_BYTES,
    known: KnownSegments | None = None,
) -> EpochPlan:
    """Plans epoch ``epoch`` from ``previous``: read tasks within the budget, then its end.

    Without a budget the epoch reads to the tail. Its tasks are
    :func:`tasks_between` the two frontiers. The end's watermark is the
    new frontier's when it rose above ``previous``'s, else None (nothing to
    emit); in the processing-time domain (``lag_ms`` None) it is always None.
    """
    if max_events is None and max_bytes is None:
        frontier = advance_to_tail(client, streams, previous, lag_ms)
    else:
        frontier = advance_within_budget(
            client, previous, lag_ms, max_events=max_events, max_bytes=max_bytes
        )
    tasks = tasks_between(
        client,
        previous,
        frontier,
        epoch,
        max_events=max_task_events,
        max_bytes=max_task_bytes,
        known=known,
    )
    rose = frontier.watermark is not None and frontier.watermark != previous.watermark
    return EpochPlan(frontier, tasks, EpochEnd(epoch, frontier.watermark if rose else None))


def tasks_between(
    client: StoreClient,
    start: Frontier,
    end: Frontier,
    epoch: int,
    *,
    max_events: int | None = MAX_TASK_EVENTS,
    max_bytes: int | None = MAX_TASK_BYTES,
    known: KnownSegments | None = None,
) -> tuple[ReadTask, ...]:
    """The read tasks of the events between ``start`` and ``end``, in the order they are read.

    One lineage chain's tasks share its lane and come in read order
    (predecessors first); each holds one piece of at most ``max_events``
    events and ``max_bytes`` bytes (:func:`~connector.reader.planning.split_range`).
    Every task carries ``start``'s watermark as the one in force. ``known``
    keeps the segments' descriptions from one call to the next (a planner's
    own; None: the store describes the streams each time).
    """
    ranges = ranges_between(start, end)
    if not ranges:
        return ()
    by_name = (known or KnownSegments()).covering(client, [r.segment for r in ranges])
    return tuple(
        ReadTask(epoch, lineage_lane(by_name, chain[0].segment), (_triple(piece),), start.watermark)
        for chain in chains_of(by_name, ranges)
        for segment_range in chain
        for piece in split_range(client, segment_range, max_events=max_events, max_bytes=max_bytes)
    )


def _triple(segment_range: SegmentRange) -> tuple[str, int, int]:
    return (segment_range.segment, segment_range.start, segment_range.stop)
