"""Which plans of the streaming source become micro-batches: data at once, watermarks in steps.

Over idle segments the store's idle ticks move some segment's watermark
every second or so (each segment's every ``--idle-tick-after-ms``), so
nearly every trigger plans an end that differs from the offset before it
by watermarks alone. Spark runs a micro-batch for every new offset, and a
micro-batch costs the driver hundreds of milliseconds whatever it reads
(its offset log, a job, its progress), so the source hands out such a plan
only when Spark has something to do with it (:func:`makes_a_batch`):

- a plan that reads anything or changes what is read (an event, a seal, a
  new segment: a position moved) is a micro-batch at once: data never
  waits for this rule;
- a plan that only moved watermarks is one when it raises the watermark
  Spark sees (the offset's ``watermark``: the event-time watermark of the
  ingestion-time and event-time domains) by at least ``idleWatermarkStep``
  (0, the default: by anything), so event time still advances with the
  idle ticks, in steps of at least that;
- in the processing-time domain, which gives Spark no watermark, such a
  plan never is one: it would change nothing Spark computes.

A plan held back so is still where the query is for what the source
reports (its progress figures, the position ``readerGroup`` publishes): it
has the offset's positions, with the store's watermarks there.
``Trigger.AvailableNow`` takes no step: its last batches carry the
watermark of the moment it started.
"""

from __future__ import annotations

from connector.reader.source import Frontier, rose

__all__ = ["makes_a_batch"]


def makes_a_batch(begin: Frontier, end: Frontier, watermark_step_ms: int = 0) -> bool:
    """Whether the plan from ``begin`` (Spark's start) to ``end`` is worth a micro-batch.

    True when ``end`` reads something ``begin`` does not (:meth:`Frontier.reads_as`),
    or when its watermark rose above ``begin``'s by ``watermark_step_ms`` or
    more (any rise at 0; a first watermark is a rise). False for ``begin`` itself.
    """
    if end is begin:
        return False
    if not begin.reads_as(end):
        return True
    if not rose(end.watermark, begin.watermark):
        return False
    assert end.watermark is not None  # it rose
    return begin.watermark is None or end.watermark - begin.watermark >= watermark_step_ms
