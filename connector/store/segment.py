"""One segment: its data file, attributes, watermark index and writer numbers.

A segment has two views. The sequencer thread, the only writer, works on the
*pending* fields while it prepares a group of operations; once the group is
durable it *publishes*, and only then do readers see the new data, watermark
or seal. Readers take ``changed`` (a condition) to read the published fields
and wait on it at the tail.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from connector.model import SegmentInfo
from connector.store.boundaries import SparseBoundaries
from connector.store.disk import write_all
from connector.store.open_files import OpenFiles
from connector.store.watermark_index import WatermarkIndex

__all__ = ["Segment", "SegmentSnapshot"]


@dataclass(frozen=True)
class SegmentSnapshot:
    """The published state a read works from."""

    committed_end: int
    watermark: int
    sealed: bool


class Segment:
    """A segment's files and state; see the module docstring for who touches what."""

    def __init__(
        self,
        name: str,
        number: int,
        key_low: float,
        key_high: float,
        epoch: int,
        creation_time: int,
        predecessors: tuple[str, ...],
        data_path: str,
        files: OpenFiles,
    ):
        self.name = name
        self.number = number
        self.key_low = key_low
        self.key_high = key_high
        self.epoch = epoch
        self.creation_time = creation_time
        self.predecessors = predecessors
        self.successors: tuple[str, ...] = ()
        self.changed = threading.Condition()
        # Published: read under `changed`.
        self.sealed = False
        self.committed_end = 0
        self.last_write_time = creation_time
        self.index = WatermarkIndex(creation_time)
        self.boundaries = SparseBoundaries()
        # Pending: the sequencer's own view.
        self.pending_end = 0
        self.pending_time = creation_time
        self.pending_sealed = False
        self.writer_numbers: dict[str, int] = {}
        self.data_path = data_path
        # No descriptor of its own: each use borrows one from the store's cache.
        self._files = files
        self.dirty = False
        # Mid-batch offsets handed out as a read's next offset: known event boundaries,
        # so a sequential reader's next read is not checked by rescanning its batch.
        self.read_boundaries: collections.OrderedDict[int, None] = collections.OrderedDict()

    # --- the sequencer's side -------------------------------------------------

    def next_time(self, now_ms: int) -> int:
        """The time of the next temporal operation: strictly after the last one."""
        self.pending_time = max(now_ms, self.pending_time + 1)
        return self.pending_time

    def write(self, frames: bytes) -> int:
        """Appends framed events to the data file (not yet durable); returns the new end.

        All of ``frames`` or nothing: on a failed or short write the file is cut
        back and the ``OSError`` raised, and the pending end does not move.
        """
        with self._files.borrow(self.data_path, writable=True) as fd:
            write_all(fd, frames, self.pending_end)
        self.pending_end += len(frames)
        self.dirty = True
        return self.pending_end

    def roll_back(self, end: int) -> None:
        """Forgets pending data after ``end`` (a group that failed to commit): cuts the file."""
        if self.pending_end > end:
            os.truncate(self.data_path, end)
        self.pending_end = end

    def sync(self) -> None:
        """Makes the written data durable."""
        if self.dirty:
            with self._files.borrow(self.data_path, writable=True) as fd:
                os.fdatasync(fd)
            self.dirty = False

    def publish(
        self,
        end: int,
        time_ms: int,
        sealed: bool = False,
        checkpoints: Sequence[int] = (),
        events: int | None = 0,
    ) -> None:
        """Makes data up to ``end`` and the operation at ``time_ms`` visible to readers.

        ``checkpoints`` are the sparse boundaries inside the data just published,
        ``events`` the number of events in it (None: not known).
        """
        with self.changed:
            self.boundaries.add(checkpoints)
            self.committed_end = end
            self.last_write_time = time_ms
            self.index.record(end - 1, time_ms - 1, events)
            self.sealed = self.sealed or sealed
            self.changed.notify_all()

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

    def snapshot(self) -> SegmentSnapshot:
        """The published end, tail watermark and seal, read consistently."""
        with self.changed:
            return SegmentSnapshot(self.committed_end, self.index.latest, self.sealed)

    def read_bytes(self, start: int, stop: int) -> bytes:
        """Reads the data file between two offsets."""
        with self._files.borrow(self.data_path) as fd:
            return os.pread(fd, stop - start, start)

    def info(self) -> SegmentInfo:
        """The segment's published attributes."""
        with self.changed:
            return SegmentInfo(
                segment=self.name,
                creation_time=self.creation_time,
                last_write_time=self.last_write_time,
                write_offset=self.committed_end,
                sealed=self.sealed,
                watermark=self.index.latest,
                key_low=self.key_low,
                key_high=self.key_high,
            )

    def remember_boundary(self, offset: int, limit: int = 256) -> None:
        """Records ``offset`` as an event boundary, keeping the ``limit`` most recent."""
        with self.changed:
            self.read_boundaries[offset] = None
            self.read_boundaries.move_to_end(offset)
            while len(self.read_boundaries) > limit:
                self.read_boundaries.popitem(last=False)

    def is_known_boundary(self, offset: int) -> bool:
        """Whether ``offset`` was handed out as a boundary recently."""
        with self.changed:
            return offset in self.read_boundaries

    def release_writer(self) -> None:
        """Closes the data file's idle write descriptor (the segment is sealed)."""
        self._files.forget(self.data_path, writable=True)

    def close(self) -> None:
        """Closes the segment's idle descriptors; closing twice is harmless."""
        self._files.forget(self.data_path)

    def __repr__(self) -> str:
        return f"Segment({self.name!r}, end={self.committed_end}, sealed={self.sealed})"
