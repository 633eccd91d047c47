"""The damaged data a server's reads met: a log line, a metric and a health state.

A read that meets an event failing its checksum is answered ``DATA_LOSS``
(:class:`~connector.errors.DataLossError`, naming the segment and offset);
the server records each such answer here. The first answer for a damaged
offset is logged (an ERROR line naming it), every one is counted
(``tidemark_data_loss_reads_total`` {stream}), and from the first one on the
health service answers NOT_SERVING for :data:`DATA_SERVICE` while the
store's own health (whether it takes writes) is unchanged: one damaged event
is no reason to take a store out of service. The record lasts as long as the
server; with it stopped, ``tidemarkctl data-dir check`` finds the damage of
a file store.
"""

from __future__ import annotations

import logging
import threading

from connector.errors import DataLossError

__all__ = ["DataLossLog"]

_log = logging.getLogger("connector.server")


class DataLossLog:
    """The damaged offsets a server's reads met, per segment, and how often; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offsets: dict[str, set[int]] = {}
        self._reads: dict[str, int] = {}

    def record(self, error: DataLossError) -> None:
        """Counts a read answered with ``error``; logs it the first time for its offset."""
        stream = error.segment.rpartition("/")[0] or error.segment
        with self._lock:
            offsets = self._offsets.setdefault(error.segment, set())
            first = error.offset not in offsets
            offsets.add(error.offset)
            self._reads[stream] = self._reads.get(stream, 0) + 1
        if first:
            _log.error("%s", error)

    @property
    def found(self) -> bool:
        """Whether any read met damaged data since the server started."""
        with self._lock:
            return bool(self._offsets)

    def damaged(self) -> dict[str, list[int]]:
        """The damaged offsets met, by segment, sorted."""
        with self._lock:
            return {segment: sorted(offsets) for segment, offsets in self._offsets.items()}

    def reads(self) -> dict[str, int]:
        """How many reads were answered DATA_LOSS, by stream (``scope/stream``)."""
        with self._lock:
            return dict(self._reads)

    def __repr__(self) -> str:
        return f"DataLossLog(segments={len(self._offsets)})"
