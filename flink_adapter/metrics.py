"""The source's metrics: Flink's standard connector names (FLIP-33) beside Tidemark's own.

On each reader subtask (operator ``Tidemark source: <streams>``):

- ``currentFetchEventTimeLag``: ms from the event time of the last event
  fetched to when the store's answer holding it arrived;
- ``currentEmitEventTimeLag``: ms from the event time of the last event
  handed to Flink to when it was handed over;
- ``watermarkLag``: ms from the last watermark this subtask emitted to now
  (when it emitted it: the gap the source adds);
- ``tidemark.eventsRead``, ``tidemark.bytesRead``, ``tidemark.lateEvents``
  (counters), ``tidemark.lateFractionPpm`` (late events over events read,
  in millionths: check it against ``with_watermark_percentile``),
  ``tidemark.pythonThreadMode`` (1 in thread mode, 0 in process mode: where
  this subtask's Python actually runs).

On the coordinator (operator ``Tidemark coordinator: <streams>``):

- ``pendingRecords``: the job's unread events: events in the store the
  source has not planned yet, counted by the store every second in one
  call (no event is read to count them);
- ``watermarkLag``: ms from the group watermark less the lag to now, when
  the last epoch was planned;
- ``tidemark.processingTimeWatermark`` and ``tidemark.processingTimeDelayMs``,
  ``tidemark.eventTimeWatermark`` and ``tidemark.eventTimeDelayMs``: the
  job's two watermarks (epoch ms) and their delays behind the store's
  clock, every second, by the rules (and the glossary's names) of the
  store's reader-group metrics (:mod:`connector.groups.progress`); once per
  stall longer than ``with_stall_log_after`` the coordinator logs what
  holds the watermark;
- ``tidemark.groupWatermark``, ``tidemark.watermarkLagMs`` (the same as
  ``watermarkLag``, as before), ``tidemark.pythonThreadMode``.

In thread mode every value is a Flink counter set to the value
(:class:`Value`), never a gauge calling Python: Flink reads a Python gauge
from its metric threads through pemja, on the interpreter state of the task
thread while that thread may be inside Python; a counter lives in the JVM.
In process mode a value is a gauge (PyFlink reports a counter only once it
has moved, so a counter left at 0 would never show).
"""

from __future__ import annotations

from typing import Any

from flink_adapter.python_mode import THREAD

__all__ = ["Value"]


class Value:
    """A metric holding the last value set (see the module docstring for how, per mode)."""

    def __init__(self, group: Any, name: str, mode: str):
        self._value: int | None = None
        self._counter = group.counter(name) if mode == THREAD else None
        if self._counter is None:
            group.gauge(name, lambda: self._value or 0)

    def set(self, value: int) -> None:
        """Makes the metric read ``value``."""
        value = int(value)
        if value != self._value:
            if self._counter is not None:
                self._counter.inc(value - (self._value or 0))
            self._value = value

    @property
    def value(self) -> int | None:
        """The value last set (None before the first)."""
        return self._value
