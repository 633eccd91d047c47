"""The sequencer: one thread that orders every change of a store and commits them in groups.

A caller hands the sequencer a *prepare* step and blocks. On the sequencer's
thread, ``prepare`` validates against the pending state, writes any data, and
queues journal records through :meth:`Sequencer.record`; it returns the
*publish* step. Once the group's data files and then its journal are fsynced,
every publish step runs (applying the records to the in-memory state, which
readers then see) and the callers get their answers. An acknowledged change is
therefore durable, and a reader never sees what a crash could take back.

A group whose data or journal cannot be made durable (a full disk, an I/O
error) fails whole: its data is cut off the files and its pending changes are
taken back through the undo steps ``prepare`` registered, so the store goes on
as if the group had never been tried. A run of such failures is logged once
per cause (:class:`~connector.background.FailureLog`), not once per group.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from connector.background import FailureLog
from connector.errors import ResourceExhaustedError, StoreUnavailableError, TidemarkError
from connector.store.file.disk import domain_error
from connector.store.file.journal import Journal
from connector.store.file.segment import Segment
from connector.store.records import Record, encode

__all__ = ["Publish", "Sequencer"]

_log = logging.getLogger(__name__)

#: The most changes committed in one group.
MAX_GROUP = 4096

#: What a prepared change does once durable; its result answers the caller.
Publish = Callable[[], Any]


@dataclass
class _Op:
    prepare: Callable[[], Publish]
    barrier: bool
    future: Future = field(default_factory=Future)


class Sequencer:
    """Orders and group-commits a store's changes on its own thread.

    Args:
        journal: where the records go.
        apply: applies one durable record to the in-memory state.
        committed: told the size of each group made durable (metrics).
        between_groups: runs on the sequencer's thread after each batch of
            groups, when every change is durable and published (compaction).
    """

    def __init__(
        self,
        journal: Journal,
        apply: Callable[[Record], None],
        committed: Callable[[int], None],
        between_groups: Callable[[], None],
    ):
        self._journal = journal
        self._apply = apply
        self._committed = committed
        self._between_groups = between_groups
        self._queue: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        # The data files the group being prepared wrote to, fsynced before its journal.
        self._written: set[Segment] = set()
        # How to take back the pending changes of the group being prepared, should its
        # commit fail: run in reverse, they leave the pending state as it was durable.
        self._undo: list[Callable[[], None]] = []
        self._failure: BaseException | None = None
        # Set when a group failed for want of disk space; cleared by the next group that
        # stores something (a group that wrote nothing proves nothing about the disk).
        self._out_of_space = False
        self._failures = FailureLog("storing changes", _log)
        #: Set once the sequencer has stopped.
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidemark-sequencer", daemon=True)
        self._thread.start()

    # --- for callers ------------------------------------------------------------

    def submit(self, prepare: Callable[[], Publish], barrier: bool) -> Any:
        """Runs ``prepare``, then its publish step once durable; returns what that returns.

        A ``barrier`` change is committed in a group of its own (metadata), so
        the changes queued before and after it are ordered around it.

        Raises:
            StoreUnavailableError: the store is closed or failed.
            TidemarkError: whatever ``prepare`` raised; the change was not made.
        """
        if self.stopped.is_set() or self._failure is not None:
            msg = (
                "the store is closed"
                if self._failure is None
                else f"the store failed: {self._failure}"
            )
            raise StoreUnavailableError(msg)
        op = _Op(prepare, barrier)
        self._queue.put(op)
        return op.future.result()

    @property
    def accepting_writes(self) -> bool:
        """False once stopped or failed, and while the last group failed for want of space."""
        return not (self.stopped.is_set() or self._failure is not None or self._out_of_space)

    def stop(self) -> None:
        """Commits what is queued, then stops the thread."""
        self._queue.put(None)
        self._thread.join()
        self.stopped.set()

    # --- for prepare steps (on the sequencer's thread) ----------------------------

    def record(self, record: Record) -> Publish:
        """Queues ``record`` in the journal; the returned step applies it once durable."""
        self._journal.add(encode(record))
        return lambda: self._apply(record)

    def wrote(self, segment: Segment, undo: Callable[[], None]) -> None:
        """Notes that ``segment``'s data file was written, and how to take it back."""
        self._written.add(segment)
        self._undo.append(undo)

    def on_failure(self, undo: Callable[[], None]) -> None:
        """Registers how to take back a pending change should its group fail."""
        self._undo.append(undo)

    # --- the thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            ops = [self._queue.get()]
            while len(ops) < MAX_GROUP:
                try:
                    ops.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            group: list[tuple[_Op, Publish]] = []
            for op in ops:
                if op is None:
                    self._commit(group)
                    return
                if op.barrier:
                    self._commit(group)
                    group = []
                prepared = self._prepare(op)
                if prepared is not None:
                    group.append((op, prepared))
                if op.barrier:
                    self._commit(group)
                    group = []
            self._commit(group)
            self._between_groups()

    def _prepare(self, op: _Op) -> Publish | None:
        if self._failure is not None:
            op.future.set_exception(StoreUnavailableError(f"the store failed: {self._failure}"))
            return None
        try:
            return op.prepare()
        except TidemarkError as error:
            op.future.set_exception(error)
        except OSError as error:  # the data file's write failed; nothing of it stays
            self._failures.failed(error)
            self._note_failure(error)
            op.future.set_exception(domain_error(error, "the change"))
        except Exception as error:  # a bug: report it to the caller, keep serving
            _log.exception("operation failed")
            op.future.set_exception(error)
        return None

    def _commit(self, group: list[tuple[_Op, Publish]]) -> None:
        """Makes a group durable, then publishes it; or fails all of it and takes it back.

        Only when taking a failed group back fails too does the store stop
        accepting changes.
        """
        undo, self._undo = self._undo, []
        if not group:
            self._written.clear()
            return
        stores = bool(self._written) or self._journal.has_pending
        try:
            for segment in self._written:
                segment.sync()
            self._journal.sync()
        except OSError as error:
            self._failures.failed(error)
            self._roll_back(undo)
            self._note_failure(error)
            failure = domain_error(error, "the change")
            for op, _ in group:
                op.future.set_exception(failure)
            return
        finally:
            self._written.clear()
        if stores:
            self._out_of_space = False
            self._failures.succeeded()
        self._committed(len(group))
        for op, publish in group:
            try:
                op.future.set_result(publish())
            except Exception as error:
                _log.exception("publishing failed")
                op.future.set_exception(error)

    def _note_failure(self, error: OSError) -> None:
        if isinstance(domain_error(error, "the change"), ResourceExhaustedError):
            self._out_of_space = True

    def _roll_back(self, undo: list[Callable[[], None]]) -> None:
        self._journal.discard()
        try:
            for step in reversed(undo):
                step()
        except OSError as error:
            _log.exception(
                "a failed group could not be taken back; the store stops accepting changes"
            )
            self._failure = error
