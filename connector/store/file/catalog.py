"""The store's in-memory state: scopes, streams and their segments, small state values.

The catalog changes only by applying durable journal records
(:meth:`Catalog.apply`), live on the sequencer's thread and at recovery, so the
state after a restart is the state before it. :meth:`Catalog.snapshot` gives
the same state back as the fewest records (for compaction).

Lock order: the catalog's lock before a segment's own.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Iterator

from connector.errors import NotFoundError
from connector.names import SegmentId
from connector.store.assertions import apply_asserted, apply_timed_out
from connector.store.file.open_files import OpenFiles
from connector.store.file.segment import Segment
from connector.store.published import SegmentIdentity
from connector.store.records import (
    Committed,
    Record,
    ScopeCreated,
    ScopeDeleted,
    StateDeleted,
    StateSet,
    StreamCreated,
    StreamDeleted,
    StreamScaled,
    StreamSealed,
    StreamState,
    StreamTicked,
    StreamTruncated,
    Ticked,
    WatermarkAsserted,
    WritersTimedOut,
)
from connector.store.streams import (
    StreamEntry,
    apply_created,
    apply_scaled,
    apply_sealed,
    apply_truncated_heads,
    place,
)

__all__ = ["Catalog", "StreamEntry"]

_log = logging.getLogger(__name__)


class Catalog:
    """Scopes, streams, segments and state values of one data dir; thread-safe to look up.

    Args:
        data_dir: where the segments' data files live (``segments/SCOPE/STREAM/N.events``).
        files: the store's cache of open data-file descriptors.
    """

    def __init__(self, data_dir: str, files: OpenFiles):
        self._data_dir = data_dir
        self._files = files
        self._lock = threading.RLock()
        self._scopes: set[str] = set()
        self._streams: dict[tuple[str, str], StreamEntry[Segment]] = {}
        # Every live segment by its one spelling: a lookup without parsing (replay does many).
        self._segments: dict[str, Segment] = {}
        self._states: dict[str, tuple[bytes, int]] = {}
        # The last revision of each deleted state value: a value stored again goes on from it.
        self._deleted_states: dict[str, int] = {}
        #: True while replaying the journal: a deletion then leaves files alone.
        self.recovering = False

    # --- lookups ------------------------------------------------------------------

    def has_scope(self, scope: str) -> bool:
        """Whether the scope exists."""
        with self._lock:
            return scope in self._scopes

    def has_stream(self, scope: str, stream: str) -> bool:
        """Whether the stream exists."""
        with self._lock:
            return (scope, stream) in self._streams

    def scopes(self) -> list[str]:
        """Every scope, sorted."""
        with self._lock:
            return sorted(self._scopes)

    def stream_names(self, scope: str) -> list[str] | None:
        """The streams of ``scope``, sorted; None when there is no such scope."""
        with self._lock:
            if scope not in self._scopes:
                return None
            return sorted(name for owner, name in self._streams if owner == scope)

    def state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted."""
        with self._lock:
            return sorted(key for key in self._states if key.startswith(prefix))

    def stream_ids(self) -> list[tuple[str, str]]:
        """Every stream's (scope, stream), sorted."""
        with self._lock:
            return sorted(self._streams)

    def stream(self, scope: str, stream: str) -> StreamEntry[Segment]:
        """The stream, or NotFoundError."""
        with self._lock:
            found = self._streams.get((scope, stream))
        if found is None:
            msg = f"stream {scope}/{stream} does not exist"
            raise NotFoundError(msg)
        return found

    def segment_of(self, stream: StreamEntry[Segment], number: int) -> Segment:
        """The stream's segment ``number``, or NotFoundError."""
        return stream.segment(number)

    def segment_named(self, name: str) -> Segment:
        """The segment ``"scope/stream/N"``; NotFoundError, or InvalidArgumentError if malformed."""
        with self._lock:
            found = self._segments.get(name)
        if found is not None:
            return found
        parsed = SegmentId.parse(name)  # says what is wrong with the name, or which part is missing
        return self.segment_of(self.stream(parsed.scope, parsed.stream), parsed.number)

    def segments(self) -> list[Segment]:
        """Every segment of every stream."""
        with self._lock:
            return list(self._segments.values())

    def streams(self) -> Iterator[StreamEntry[Segment]]:
        """Every stream (a copy of the list)."""
        with self._lock:
            return iter(list(self._streams.values()))

    def state(self, key: str) -> tuple[bytes, int]:
        """The value and revision stored under ``key``; revision 0 when there is none."""
        with self._lock:
            return self._states.get(key, (b"", 0))

    def state_at_once(self, key: str) -> tuple[bytes, int] | None:
        """:meth:`state` if the lock is free now; None while another thread holds it.

        For a caller that must not wait (the server's event loop): the lock
        is held across file deletions of a truncation or a deleted stream.
        """
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self._states.get(key, (b"", 0))
        finally:
            self._lock.release()

    def next_state_revision(self, key: str) -> int:
        """The revision the next value stored under ``key`` takes.

        One past the current one, or past the last one of a deleted value, so
        a revision is never given twice to one key.
        """
        with self._lock:
            stored = self._states.get(key)
            return (stored[1] if stored else self._deleted_states.get(key, 0)) + 1

    def segment_count(self) -> int:
        """How many segments there are, sealed ones too."""
        with self._lock:
            return len(self._segments)

    def __len__(self) -> int:
        """How many streams there are."""
        return len(self._streams)

    # --- applying records ---------------------------------------------------------

    def apply(self, record: Record) -> int | None:
        """Applies one durable record (on the sequencer's thread, or at recovery).

        Returns the bytes a truncation freed (None for other records).
        """
        with self._lock:
            match record:
                case StreamTruncated():
                    return self._apply_truncate(record)
                case ScopeCreated(scope):
                    self._scopes.add(scope)
                case ScopeDeleted(scope):
                    self._scopes.discard(scope)
                case StreamCreated(scope, stream):
                    entry: StreamEntry[Segment] = StreamEntry(scope, stream)
                    self._streams[(scope, stream)] = entry
                    apply_created(entry, record, self._new_segment)
                case StreamScaled(scope, stream):
                    apply_scaled(self._streams[(scope, stream)], record, self._new_segment)
                case StreamSealed(scope, stream):
                    apply_sealed(self._streams[(scope, stream)], record)
                case StreamDeleted():
                    self._apply_delete(record)
                case Committed(segment, end, time_ms, writer_id, last, checkpoints, events):
                    self.segment_named(segment).apply_commit(
                        writer_id, last, end, time_ms, checkpoints, events
                    )
                case Ticked(segment, time_ms):
                    self.segment_named(segment).apply_tick(time_ms)
                case StreamTicked(scope, stream, stamps):
                    ticked = self._streams[(scope, stream)].segments
                    for stamp in stamps:
                        ticked[stamp.number].apply_tick(stamp.time_ms)
                case WatermarkAsserted(scope, stream):
                    apply_asserted(self._streams[(scope, stream)], record)
                case WritersTimedOut(scope, stream):
                    apply_timed_out(self._streams[(scope, stream)], record)
                case StateSet(key, value, revision):
                    self._states[key] = (value, revision)
                    self._deleted_states.pop(key, None)
                case StateDeleted(key, revision):
                    self._states.pop(key, None)
                    self._deleted_states[key] = revision
                case StreamState():
                    self._apply_stream_state(record)

    def snapshot(self) -> list[Record]:
        """The live state as the fewest records: scopes, streams with their segments, states."""
        with self._lock:
            records: list[Record] = [ScopeCreated(s) for s in sorted(self._scopes)]
            records.extend(_stream_state(entry) for entry in self._streams.values())
            records.extend(
                StateSet(key, value, revision)
                for key, (value, revision) in sorted(self._states.items())
            )
            records.extend(
                StateDeleted(key, revision)
                for key, revision in sorted(self._deleted_states.items())
            )
            return records

    def _apply_truncate(self, record: StreamTruncated) -> int:
        entry = self._streams[(record.scope, record.stream)]
        apply_truncated_heads(entry, record)
        # At recovery a file of the same path may belong to a stream created since.
        return sum(
            entry.segments[number].drop_data(delete_file=not self.recovering)
            for number in record.removed
        )

    def _apply_delete(self, record: StreamDeleted) -> None:
        removed = self._streams.pop((record.scope, record.stream))
        for segment in removed.segments.values():
            del self._segments[segment.name]
            segment.wake_readers()
            segment.close()
        if self.recovering:
            # A stream of the same name may have been created since: its files are live.
            return
        folder = self._stream_folder(removed.scope, removed.stream)
        try:
            shutil.rmtree(folder)
        except OSError as error:  # the deletion is durable; the files are only garbage now
            _log.warning("the data files of %s/%s stay: %s", removed.scope, removed.stream, error)

    def _apply_stream_state(self, record: StreamState) -> None:
        entry: StreamEntry[Segment] = StreamEntry(
            record.scope, record.stream, record.epoch, record.sealed
        )
        self._streams[(entry.scope, entry.stream)] = entry
        folder = self._make_folder(entry)
        for state in record.segments:
            segment = Segment.restored(
                state,
                name=entry.segment_name(state.number),
                data_path=os.path.join(folder, f"{state.number}.events"),
                files=self._files,
            )
            self._place(entry, segment)

    def _new_segment(self, entry: StreamEntry[Segment], identity: SegmentIdentity) -> Segment:
        data_path = os.path.join(self._make_folder(entry), f"{identity.number}.events")
        segment = Segment(identity, data_path, self._files)
        self._segments[segment.name] = segment
        return segment

    def _place(self, entry: StreamEntry[Segment], segment: Segment) -> None:
        place(entry, segment)
        self._segments[segment.name] = segment

    def _make_folder(self, entry: StreamEntry[Segment]) -> str:
        folder = self._stream_folder(entry.scope, entry.stream)
        os.makedirs(folder, exist_ok=True)
        return folder

    def _stream_folder(self, scope: str, stream: str) -> str:
        return os.path.join(self._data_dir, "segments", scope, stream)


def _stream_state(entry: StreamEntry[Segment]) -> StreamState:
    """A stream's durable state, for a compacted journal."""
    segments = tuple(s.state() for s in entry.segments.values())
    return StreamState(entry.scope, entry.stream, entry.epoch, entry.sealed, segments)
