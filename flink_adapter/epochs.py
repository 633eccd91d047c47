"""An epoch of the Flink source: what the coordinator sends its readers, as typed values.

The coordinator plans an epoch with the reader core
(:meth:`~connector.reader.source.SourcePlanner.step`) and sends, in order:

- the epoch's :class:`~connector.reader.source.ReadTask` values (pieces of
  at most so many events and bytes, each lineage's in its lane, in read
  order): PyFlink hands a function's output for one input to the JVM only
  once that input is done, so a task's size bounds how long its events wait
  in the reader;
- then one :class:`EpochEnd`, carrying the epoch's event-time watermark when
  it rose (:func:`epoch_records`).

Both are plain frozen values of the core and this module, which PyFlink
pickles on the way (:data:`RECORD_TYPE`): one encoding, no hand-made format.
Every task carries the watermark in force while it is read (the previous
epoch's), so a reader flags an event late exactly when its event time is at
or below it: the same answer at any parallelism, and after a restore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyflink.common import Types

from connector.reader.source import Frontier, ReadTask, Step

__all__ = [
    "MAX_EPOCH_BYTES",
    "MAX_EPOCH_EVENTS",
    "MAX_TASK_BYTES",
    "MAX_TASK_EVENTS",
    "RECORD_TYPE",
    "EpochEnd",
    "epoch_records",
]

#: The most events one epoch reads, by default.
MAX_EPOCH_EVENTS = 100_000
#: The most bytes one epoch reads, by default.
MAX_EPOCH_BYTES = 64 * 1024 * 1024
#: The most events one read task holds, by default. Measured on 1,000,000 events of 100 bytes
#: at parallelism 2: tasks of 4,000 read 1.3 to 1.6 times the events per second of tasks of
#: 1,000 in both Python modes (a store call, a task record and a Python call fewer for every
#: 1,000 events), tasks of 250 about 0.9 times, tasks of 16,000 no more than 4,000.
MAX_TASK_EVENTS = 4_000
#: The most bytes one read task holds, by default (a larger event is a task of its own).
MAX_TASK_BYTES = 1024 * 1024

#: The Flink type of the coordinator's records: ReadTask and EpochEnd values, pickled.
RECORD_TYPE: Any = Types.PICKLED_BYTE_ARRAY()


@dataclass(frozen=True)
class EpochEnd:
    """The end of an epoch: every reader subtask emits ``watermark`` (when not None) on it."""

    epoch: int
    watermark: int | None


def epoch_records(epoch: int, previous: Frontier, step: Step) -> list[ReadTask | EpochEnd]:
    """Epoch ``epoch``'s records: its tasks, then its end, with the watermark if it rose."""
    frontier = step.frontier
    watermark = frontier.watermark if frontier.rose_above(previous) else None
    return [*step.tasks, EpochEnd(epoch, watermark)]
