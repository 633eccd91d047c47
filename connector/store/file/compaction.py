"""Journal compaction: rewriting the journal as a snapshot of the live state.

Without it the journal grows with history (every append and idle tick is a
record) and a restart replays all of it. Compaction bounds a restart by the
live state plus at most ``compact_after_records`` records of history, or
twice the snapshot's bytes, whichever is more.
The store runs it as a background task (:mod:`connector.background`): a
failed compaction is logged once, counted, and retried a period later.
"""

from __future__ import annotations

import logging

from connector.store.file.catalog import Catalog
from connector.store.file.journal import Journal
from connector.store.records import encode

__all__ = ["Compaction"]

_log = logging.getLogger(__name__)


class Compaction:
    """When and how a journal is compacted.

    The journal is rewritten once it holds ``after_records`` records and
    twice the bytes of its last snapshot, so compaction costs amortized O(1)
    per byte journaled: a store of thousands of idle segments, whose snapshot
    is large and whose tick rounds are a record a stream, is rewritten every
    few minutes, not every few rounds (a rewrite holds the store's changes
    back while it runs). Records are counted as the journal weighs them
    (:func:`~connector.store.records.changes_in`: a round of ticks and a
    stream's state count their segments).
    """

    def __init__(self, journal: Journal, catalog: Catalog, after_records: int):
        self._journal = journal
        self._catalog = catalog
        self._after_records = after_records
        self._snapshot_bytes = 0

    def maybe_compact(self) -> None:
        """Compacts if due; call only when every change is durable and published.

        Between groups the snapshot is exactly the durable state.

        Raises:
            OSError: the rewrite failed (a full disk); the old journal stays in
                place and compaction is still due, so the next call tries again.
        """
        records = self._journal.records
        if records < self._after_records or self._journal.size < 2 * self._snapshot_bytes:
            return
        snapshot = [encode(record) for record in self._catalog.snapshot()]
        self._journal.rewrite(snapshot)
        _log.info("compacted the journal: %d changes to %d records", records, len(snapshot))
        self._snapshot_bytes = self._journal.size
