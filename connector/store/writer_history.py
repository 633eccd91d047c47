"""Each writer's assertions in one segment by offset, so the writers at a past position are known.

The event-time index (:mod:`~connector.store.event_time_index`) keeps the
least active assertion by offset; a percentile over the writers
(:mod:`connector.groups.percentile`) needs each one's. This keeps, per
writer, its latest :data:`KEPT` changes ``(offset, time)``: from byte
``offset`` on, the writer held ``time`` (None: not active). A position
older than a writer's oldest change kept is answered with a floor the
caller gives (the least assertion there): never above the truth.

Built from the same changes as the marks (:meth:`PublishedSegment._publish`),
so it is rebuilt at recovery like them; not thread-safe (the segment's
lock guards it).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping

from connector.store.event_time import WriterMark

__all__ = ["KEPT", "WriterHistory"]

#: How many changes each writer keeps.
KEPT = 64


def _held(mark: WriterMark | None) -> int | None:
    return mark.event_time if mark is not None and mark.active else None


class WriterHistory:
    """Per writer, its latest changes of assertion by offset; see the module docstring."""

    def __init__(self) -> None:
        self._offsets: dict[str, list[int]] = {}
        self._times: dict[str, list[int | None]] = {}
        self._trimmed: set[str] = set()

    @classmethod
    def resumed(cls, offset: int, marks: Mapping[str, WriterMark]) -> WriterHistory:
        """A history that knows ``marks`` from ``offset`` on and nothing of the writers before."""
        history = cls()
        history.record(offset, {}, marks)
        history._trimmed.update(marks)
        return history

    def record(
        self, offset: int, before: Mapping[str, WriterMark], after: Mapping[str, WriterMark]
    ) -> None:
        """Notes the writers whose assertion changed from ``before`` to ``after`` at ``offset``."""
        for writer_id in before.keys() | after.keys():
            held = _held(after.get(writer_id))
            if held == _held(before.get(writer_id)) and writer_id in self._times:
                continue
            offsets = self._offsets.setdefault(writer_id, [])
            times = self._times.setdefault(writer_id, [])
            if offsets and offsets[-1] == offset:
                times[-1] = held
            else:
                offsets.append(offset)
                times.append(held)
            if len(offsets) > KEPT:
                del offsets[0], times[0]
                self._trimmed.add(writer_id)

    def at(self, offset: int, floor: int | None) -> list[int]:
        """The assertions of the writers active at ``offset``, one per writer.

        A writer whose changes kept all come after ``offset`` but who had
        older ones counts at ``floor`` (unless None: no writer was active).
        """
        held = []
        for writer_id, offsets in self._offsets.items():
            i = bisect_right(offsets, offset) - 1
            if i >= 0:
                time = self._times[writer_id][i]
            elif writer_id in self._trimmed:
                time = floor
            else:
                continue
            if time is not None:
                held.append(time)
        return held

    def __len__(self) -> int:
        return len(self._offsets)
