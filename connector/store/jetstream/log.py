"""A Tidemark stream as the fold of its JetStream stream's messages, the same on every server.

:class:`StreamLog` applies the messages of one JetStream stream (see
:mod:`.messages`) to a :class:`~connector.store.streams.StreamEntry` of
:class:`~.segment.JetStreamSegment`: records on the meta subject create,
scale, seal and truncate it with the functions the file store's journal uses
(:mod:`connector.store.streams`); each segment subject's appends, ticks and
seal marker move that segment's end, LAST_WRITE_TIME and watermark index.
Every server applies the same messages in the same order (JetStream's
sequence), so every server holds the same segments, lineage, offsets and
watermark index: nothing of it exists only on the server that wrote it.

Messages arrive two ways, both on the store's event loop: in stream order
(:meth:`StreamLog.apply_in_order`, from the server's follower or a catch-up),
and at once after this server's own publish is acknowledged
(:meth:`StreamLog.apply_published`), so a writer reads its own writes on the
server it wrote through. Each subject's last applied sequence makes either
way idempotent.

Ingestion times are the publisher's, strictly increasing per segment (it
stamps ``max(now, last + 1)`` and publishes expecting the last message it
saw). A time that does not rise (a log written by something else) is raised
to the last one + 1, on every server alike, and logged: watermarks never
fall.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator

from connector.errors import NotFoundError
from connector.names import SegmentId
from connector.store.assertions import apply_asserted, apply_timed_out
from connector.store.jetstream.messages import (
    Appended,
    Entry,
    FenceMarker,
    MetaRecord,
    SealMarker,
    TickMessage,
)
from connector.store.jetstream.naming import segment_number_of, segment_subject
from connector.store.jetstream.segment import FetchPayloads, JetStreamSegment
from connector.store.published import SegmentIdentity
from connector.store.records import (
    StreamCreated,
    StreamScaled,
    StreamSealed,
    StreamTruncated,
    WatermarkAsserted,
    WritersTimedOut,
)
from connector.store.streams import (
    StreamEntry,
    apply_created,
    apply_scaled,
    apply_sealed,
    apply_truncated_heads,
)

__all__ = ["StreamLog"]

_log = logging.getLogger(__name__)


class StreamLog:
    """One Tidemark stream rebuilt from its JetStream stream; see the module docstring.

    Args:
        scope, stream: the Tidemark stream's name.
        namespace, uid: where its JetStream stream is (:mod:`.naming`).
        fetch: fetches the payloads of its segments' messages, for reads.
    """

    def __init__(self, scope: str, stream: str, namespace: str, uid: str, fetch: FetchPayloads):
        self.entry: StreamEntry[JetStreamSegment] = StreamEntry(scope, stream)
        self.namespace = namespace
        self.uid = uid
        self._fetch = fetch
        self._lock = threading.RLock()
        self._by_name: dict[str, JetStreamSegment] = {}
        #: The last stream sequence applied in order (what a catch-up waits for).
        self.applied = 0
        #: The meta subject's last sequence applied (what the next record expects).
        self.meta_seq = 0
        #: Set once the creation record is applied.
        self.created = threading.Event()

    # --- lookups (any thread) ---------------------------------------------------------

    @property
    def name(self) -> str:
        """``scope/stream``."""
        return f"{self.entry.scope}/{self.entry.stream}"

    @property
    def entry_names(self) -> tuple[str, str]:
        """``(scope, stream)``."""
        return self.entry.scope, self.entry.stream

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Holds the log still (no message applied) for the ``with`` block."""
        with self._lock:
            yield

    def picked(self, among: Callable[[StreamEntry[JetStreamSegment]], bool]) -> bool:
        """``among(entry)`` on the live entry, the log held still; no copy is made."""
        with self._lock:
            return among(self.entry)

    def snapshot(self) -> StreamEntry[JetStreamSegment]:
        """The stream's entry as a copy whose segment map later messages do not change."""
        with self._lock:
            entry = self.entry
            return StreamEntry(
                entry.scope,
                entry.stream,
                entry.epoch,
                entry.sealed,
                dict(entry.segments),
                entry.changes,
            )

    def segment_named(self, name: str) -> JetStreamSegment:
        """The segment ``name`` of this stream, or NotFoundError."""
        with self._lock:
            found = self._by_name.get(name)
        if found is None:
            parsed = SegmentId.parse(name)
            msg = f"segment {parsed} does not exist"
            raise NotFoundError(msg)
        return found

    def segment(self, number: int) -> JetStreamSegment:
        """The segment ``number``, or NotFoundError."""
        with self._lock:
            return self.entry.segment(number)

    def segments(self) -> list[JetStreamSegment]:
        """Every segment, by number."""
        with self._lock:
            return [self.entry.segments[n] for n in sorted(self.entry.segments)]

    def __iter__(self) -> Iterator[JetStreamSegment]:
        return iter(self.segments())

    # --- applying messages (the store's event loop) -------------------------------------

    def apply_in_order(self, seq: int, subject: str, entry: Entry) -> None:
        """Applies the message at stream sequence ``seq`` unless applied already; in order."""
        if seq <= self.applied:
            return
        self._apply(seq, subject, entry)
        with self._lock:
            self.applied = seq

    def skip(self, seq: int) -> None:
        """Counts the message at ``seq`` as applied without applying it (it is not Tidemark's)."""
        with self._lock:
            self.applied = max(self.applied, seq)

    def apply_published(self, seq: int, subject: str, entry: Entry) -> None:
        """Applies this server's own message as soon as JetStream acknowledged it.

        Messages of other subjects before it may still be on their way; this
        one comes right after the last one of its own subject (its publish
        expected that one), so its subject stays in order.
        """
        self._apply(seq, subject, entry)

    def _apply(self, seq: int, subject: str, entry: Entry) -> None:
        number = segment_number_of(subject)
        with self._lock:
            if number is None:
                if seq <= self.meta_seq:
                    return
                self.meta_seq = seq
                if isinstance(entry, MetaRecord):
                    self._apply_record(entry)
                return
            segment = self.entry.segments.get(number)
            if segment is None:
                _log.error("%s: message %d is to a segment it lacks, %d", self.name, seq, number)
                return
        if seq <= segment.last_seq:
            return
        match entry:
            case Appended():
                segment.apply_appended(seq, entry, self._rising(segment, entry.time_ms, seq))
            case TickMessage():
                segment.apply_tick(self._rising(segment, entry.time_ms, seq))
            case SealMarker():
                segment.apply_marker(entry)
            case FenceMarker():
                pass  # its place in the order is all it is
        # After the state it leads to: whoever reads this sequence sees that state.
        segment.last_seq = seq

    def _rising(self, segment: JetStreamSegment, time_ms: int, seq: int) -> int:
        if time_ms > segment.last_write_time:
            return time_ms
        _log.error(
            "%s: message %d stamps %d, not after the segment's last time %d; taking %d",
            segment.name,
            seq,
            time_ms,
            segment.last_write_time,
            segment.last_write_time + 1,
        )
        return segment.last_write_time + 1

    def _apply_record(self, entry: MetaRecord) -> None:
        record = entry.record
        match record:
            case StreamCreated():
                apply_created(self.entry, record, self._new_segment)
                self.created.set()
            case StreamScaled():
                apply_scaled(self.entry, record, self._new_segment)
            case StreamSealed():
                apply_sealed(self.entry, record)
            case StreamTruncated():
                apply_truncated_heads(self.entry, record)
                for number in record.removed:
                    self.entry.segments[number].drop_data()
            case WatermarkAsserted():
                apply_asserted(self.entry, record)
            case WritersTimedOut():
                apply_timed_out(self.entry, record)
            case _:
                _log.error("%s: a record of a kind a stream does not hold: %r", self.name, record)

    def _new_segment(
        self, entry: StreamEntry[JetStreamSegment], identity: SegmentIdentity
    ) -> JetStreamSegment:
        subject = segment_subject(self.namespace, self.uid, identity.number)
        segment = JetStreamSegment(identity, subject, self._fetch)
        self._by_name[segment.name] = segment
        return segment

    def close(self) -> None:
        """Ends every wait at a tail of the stream (it is going away, or the store closing)."""
        for segment in self.segments():
            segment.wake_readers()

    def __repr__(self) -> str:
        return f"StreamLog({self.name!r}, uid={self.uid!r}, applied={self.applied})"
