"""Opening a data dir: replaying the journal into a catalog and checking the data files.

A data file may hold more than its segment's journal committed (an append
whose group never became durable): the extra bytes were never acknowledged
and are cut. It may never hold less: that would mean acknowledged data lost,
and the store refuses to start rather than serve a gap. A journal damaged
beyond a torn tail is refused too (:mod:`connector.store.file.journal`), before
any data file is touched, so a damaged commit never makes acknowledged data
look unacknowledged. Neither refusal cuts or deletes anything: ``tidemarkctl
data-dir check`` says what is damaged, ``data-dir repair`` salvages
(:mod:`connector.store.file.salvage`). A flipped bit inside a data file is not
looked for here (that would read every byte at every start): reads check
every frame they serve.
"""

from __future__ import annotations

import logging
import os

from connector.errors import DataDirDamagedError, quoted
from connector.store.file.catalog import Catalog
from connector.store.file.data_dir import unusable
from connector.store.file.journal import Journal
from connector.store.records import changes_in, decode

__all__ = ["open_journal", "recover"]

_log = logging.getLogger(__name__)


def open_journal(data_dir: str) -> Journal:
    """The data dir's journal, the dir made if need be; a dir that cannot be used is refused.

    Raises:
        InvalidArgumentError: ``data_dir`` is a file, on a read-only file
            system, not writable or otherwise unusable (one line, no traceback).
    """
    try:
        os.makedirs(os.path.join(data_dir, "segments"), exist_ok=True)
        return Journal(os.path.join(data_dir, "journal.log"), weigh=changes_in)
    except OSError as error:
        raise unusable(data_dir, error) from None


def recover(catalog: Catalog, journal: Journal) -> int:
    """Applies every journal record to ``catalog`` and squares the data files with it.

    Returns how many records were replayed.

    Raises:
        DataDirDamagedError: the journal is damaged beyond a torn tail, or a
            data file holds less than was committed; nothing was cut.
        FailedPreconditionError: the journal holds a record of an unknown kind.
    """
    records = 0
    catalog.recovering = True
    try:
        for encoded in journal.replay():
            catalog.apply(decode(encoded))
            records += 1
    finally:
        catalog.recovering = False
    for segment in catalog.segments():
        if segment.wholly_truncated:
            continue  # its data file was deleted with its data
        size = segment.data_size()
        if size < segment.committed_end:
            msg = (
                f"data file {quoted(segment.data_path)} of segment {segment.name!r} holds "
                f"{size} bytes but {segment.committed_end} were committed: acknowledged data "
                "is missing. Nothing was cut. See what is damaged with: tidemarkctl data-dir "
                f"check {quoted(os.path.dirname(journal.path))}"
            )
            raise DataDirDamagedError(msg, segment.data_path, size)
        if size > segment.committed_end:
            _log.warning(
                "segment %s: cutting %d unacknowledged bytes",
                segment.name,
                size - segment.committed_end,
            )
            segment.truncate_to(segment.committed_end)
    _log.info(
        "recovered %d journal records: %d scopes, %d streams",
        records,
        len(catalog.scopes()),
        len(catalog),
    )
    return records
