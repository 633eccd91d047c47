"""Journal compaction: fold away idle ticks that a later tick of the same segment replaced.

An idle tick records a watermark at a segment's tail. A later tick of the
same segment, with nothing else written to that segment in between, records
a later watermark at the same offset, which replaces the earlier one in the
watermark index (:class:`~connector.store.watermark_index.WatermarkIndex`);
so the earlier tick changes nothing that replay ends with. An idle store
writes such ticks forever; folding them keeps the journal, and the time a
restart takes, in proportion to the live state rather than to its history.

Pure functions over the journal's records (plain dicts), so they are
tested without a store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["TickFolding", "fold_ticks"]

# Records that change segments other than through their "seg" field: after one of them no
# earlier tick is folded into a later one (scale and seal move watermarks of many segments).
_BARRIERS = frozenset({"stream", "scale", "seal_stream"})


class TickFolding:
    """Follows records as they are written; counts the ticks a compaction would fold."""

    def __init__(self) -> None:
        self._ticking: set[str] = set()  # segments whose last record is a tick
        self.foldable = 0

    def observe(self, record: Mapping[str, Any]) -> None:
        """Takes note of one record, in journal order."""
        op = record["op"]
        if op == "tick":
            if record["seg"] in self._ticking:
                self.foldable += 1
            self._ticking.add(record["seg"])
        elif op == "commit":
            self._ticking.discard(record["seg"])
        elif op in _BARRIERS:
            self._ticking.clear()

    def reset(self) -> None:
        """After a compaction: nothing is foldable; segments still ticking stay so."""
        self.foldable = 0


def fold_ticks(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``records`` without every tick a later tick of the same segment replaces.

    Replaying the result leaves every segment's data end, last write time,
    watermark index and writer numbers as replaying ``records`` does.
    """
    kept: list[Mapping[str, Any] | None] = []
    last_tick: dict[str, int] = {}  # segment -> position in kept of its replaceable tick
    for record in records:
        op = record["op"]
        if op == "tick":
            earlier = last_tick.get(record["seg"])
            if earlier is not None:
                kept[earlier] = None
            last_tick[record["seg"]] = len(kept)
        elif op == "commit":
            last_tick.pop(record["seg"], None)
        elif op in _BARRIERS:
            last_tick.clear()
        kept.append(record)
    return [record for record in kept if record is not None]
