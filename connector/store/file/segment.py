"""One segment of the file store: a :class:`PublishedSegment` whose bytes live in a data file.

A segment has two views. The sequencer thread, the only writer, works on the
*pending* fields while it prepares a group of operations (writing the data
file ahead of the journal); once the group is durable it *publishes*, and
only then do readers see the new data, watermark or seal
(:mod:`connector.store.published`). Only the segment's methods change its
fields: the store asks, the segment keeps itself consistent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from connector.store.boundaries import SparseBoundaries
from connector.store.event_time_index import EventTimeIndex
from connector.store.file.disk import domain_error, write_all
from connector.store.file.open_files import OpenFiles
from connector.store.published import PublishedSegment, SegmentIdentity, SegmentSnapshot
from connector.store.records import SegmentState
from connector.store.watermark_index import WatermarkIndex
from connector.store.writer_history import WriterHistory

__all__ = ["Segment", "SegmentSnapshot"]

_log = logging.getLogger(__name__)


class Segment(PublishedSegment):
    """A segment's data file and state; see the module docstring for who touches what."""

    def __init__(self, identity: SegmentIdentity, data_path: str, files: OpenFiles):
        super().__init__(identity)
        self.data_path = data_path
        # No descriptor of its own: each use borrows one from the store's cache.
        self._files = files

    @classmethod
    def restored(cls, state: SegmentState, name: str, data_path: str, files: OpenFiles) -> Segment:
        """The segment a compacted journal's :class:`SegmentState` describes."""
        identity = SegmentIdentity(
            name=name,
            number=state.number,
            key_low=state.key_low,
            key_high=state.key_high,
            epoch=state.epoch,
            creation_time=state.creation_time,
            predecessors=state.predecessors,
        )
        segment = cls(identity, data_path, files)
        segment.successors = state.successors
        segment.sealed = segment.pending_sealed = state.sealed
        segment.committed_end = segment.pending_end = state.end
        segment.last_write_time = state.last_write_time
        segment.pending_time = state.pending_time
        segment._index = WatermarkIndex.restored(
            list(state.index_offsets), list(state.index_watermarks), state.index_counts
        )
        segment._checkpoints = SparseBoundaries(state.checkpoints)
        segment._writer_numbers = dict(state.writer_numbers)
        segment.head = state.head
        segment._event_index = EventTimeIndex.restored(
            list(state.event_index_offsets), list(state.event_index_times)
        )
        segment._marks = dict(state.writer_marks)
        segment._pending_marks = dict(state.writer_marks)
        segment._writer_history = WriterHistory.resumed(state.end, state.writer_marks)
        return segment

    def state(self) -> SegmentState:
        """The segment's durable state, for a compacted journal (between groups only)."""
        offsets, watermarks = self._index.entries()
        counts = self._index.counts()
        event_offsets, event_times = self._event_index.entries()
        return SegmentState(
            number=self.number,
            key_low=self.key_low,
            key_high=self.key_high,
            epoch=self.epoch,
            creation_time=self.creation_time,
            predecessors=self.predecessors,
            successors=self.successors,
            sealed=self.sealed,
            end=self.committed_end,
            last_write_time=self.last_write_time,
            pending_time=self.pending_time,
            index_offsets=tuple(offsets),
            index_watermarks=tuple(watermarks),
            index_counts=None if counts is None else tuple(counts),
            checkpoints=tuple(self._checkpoints.entries()),
            writer_numbers=dict(self._writer_numbers),
            head=self.head,
            event_index_offsets=tuple(event_offsets),
            event_index_times=tuple(event_times),
            writer_marks=dict(self._marks),
        )

    # --- the sequencer's side -------------------------------------------------

    def stage_append(
        self, frames: bytes, writer_id: str, last_event_number: int
    ) -> tuple[int, Callable[[], None]]:
        """Writes framed events to the data file (not yet durable).

        Returns the new pending end and the step that takes the append back
        should its group fail to commit. All of ``frames`` or nothing: on a
        failed or short write the file is cut back, the ``OSError`` raised and
        nothing pending moves.
        """
        previous_end = self.pending_end
        previous_number = self._writer_numbers.get(writer_id)
        with self._files.borrow(self.data_path, writable=True) as fd:
            write_all(fd, frames, previous_end)
        self.pending_end += len(frames)
        self._writer_numbers[writer_id] = last_event_number

        def undo() -> None:
            if self.pending_end > previous_end:
                os.truncate(self.data_path, previous_end)
            self.pending_end = previous_end
            if previous_number is None:
                self._writer_numbers.pop(writer_id, None)
            else:
                self._writer_numbers[writer_id] = previous_number

        return self.pending_end, undo

    def stage_fence(self, writer_id: str, last_event_number: int) -> Callable[[], None]:
        """Takes ``writer_id``'s numbers up to ``last_event_number`` as used (an assertion's fence).

        Returns the step that takes it back should its group fail.
        """
        previous = self._writer_numbers.get(writer_id)
        self._writer_numbers[writer_id] = max(
            last_event_number, -1 if previous is None else previous
        )

        def undo() -> None:
            if previous is None:
                self._writer_numbers.pop(writer_id, None)
            else:
                self._writer_numbers[writer_id] = previous

        return undo

    def begin_seal(self) -> Callable[[], None]:
        """Refuses further appends from now on; returns the step that takes it back."""
        self.pending_sealed = True

        def undo() -> None:
            self.pending_sealed = False

        return undo

    def sync(self) -> None:
        """Makes the written data durable."""
        with self._files.borrow(self.data_path, writable=True) as fd:
            os.fdatasync(fd)

    # --- applying durable records (live, and at recovery) ---------------------

    def seal(self, time_ms: int, successors: tuple[str, ...] | None = None) -> None:
        """Publishes the seal at ``time_ms`` (and the successors); closes the file for writing."""
        super().seal(time_ms, successors)
        self._files.forget(self.data_path, writable=True)

    def drop_data(self, delete_file: bool) -> int:
        """Truncates the whole (sealed) segment and, with ``delete_file``, deletes its data file.

        Returns the bytes freed. Reading at its end still gives its successors.
        """
        self.truncate(self.committed_end)
        self._files.forget(self.data_path)
        if not delete_file:
            return 0
        freed = self.data_size()
        try:
            os.remove(self.data_path)
        except FileNotFoundError:
            return 0
        return freed

    # --- recovery ---------------------------------------------------------------

    def truncate_to(self, end: int) -> None:
        """Cuts the data file to ``end`` (recovery: drops an unacknowledged tail)."""
        with self._files.borrow(self.data_path, writable=True) as fd:
            os.ftruncate(fd, end)
            os.fsync(fd)

    def data_size(self) -> int:
        """The data file's current size in bytes (0 before its first write)."""
        try:
            return os.stat(self.data_path).st_size
        except FileNotFoundError:
            return 0

    # --- the readers' side ----------------------------------------------------

    def read_bytes(self, start: int, stop: int) -> bytes:
        """Reads the data file between two offsets.

        Raises:
            ResourceExhaustedError: no file descriptor was left to read with.
            StoreUnavailableError: the data file could not be read.
        """
        try:
            with self._files.borrow(self.data_path) as fd:
                return os.pread(fd, stop - start, start)
        except OSError as error:  # no descriptor left, or the disk failed under the read
            _log.warning("a read of %s failed: %s", self.name, error)
            raise domain_error(error, "the read", "served") from None

    def close(self) -> None:
        """Closes the segment's idle descriptors; closing twice is harmless."""
        self._files.forget(self.data_path)
