"""Journal compaction: rewriting the journal as a snapshot of the live state.

Without it the journal grows with history (every append and idle tick is a
record) and a restart replays all of it. Compaction bounds a restart by the
live state plus at most ``compact_after_records`` records of history.
"""

from __future__ import annotations

import logging

from connector.store.catalog import Catalog
from connector.store.journal import Journal
from connector.store.records import encode

__all__ = ["Compaction"]

_log = logging.getLogger(__name__)


class Compaction:
    """When and how a journal is compacted.

    The journal is rewritten once it holds ``after_records`` records and twice
    as many as its last snapshot, so compaction costs amortized O(1) per record.
    """

    def __init__(self, journal: Journal, catalog: Catalog, after_records: int):
        self._journal = journal
        self._catalog = catalog
        self._after_records = after_records
        self._snapshot_records = 0

    def maybe_compact(self) -> None:
        """Compacts if due; call only when every change is durable and published.

        Between groups the snapshot is exactly the durable state. A failed
        rewrite (a full disk) leaves the old journal in place and is tried
        again once the journal has grown as much again.
        """
        records = self._journal.records
        if records < max(self._after_records, 2 * self._snapshot_records):
            return
        snapshot = [encode(record) for record in self._catalog.snapshot()]
        try:
            self._journal.rewrite(snapshot)
        except OSError as error:
            _log.warning("the journal was not compacted: %s", error)
            self._snapshot_records = records
            return
        _log.info("compacted the journal: %d records to %d", records, len(snapshot))
        self._snapshot_records = len(snapshot)
