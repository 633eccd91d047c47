"""A segment of the JetStream store: a :class:`PublishedSegment` whose bytes are in messages.

Its published state (end, watermark index, seal, head, writers' numbers) is
rebuilt from its subject's messages by :class:`~.log.StreamLog`, the same on
every server. Beside it the segment keeps a directory of its append messages
(where each starts and ends, and its JetStream sequence), so a read of a byte
range knows which messages to fetch, and the subject's last sequence, which
the next publish to the segment expects (JetStream's
``Nats-Expected-Last-Subject-Sequence``): a publish from a server whose view
is behind fails instead of landing out of order.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from connector.model import initial_watermark
from connector.store.event_time_index import EventTimeIndex
from connector.store.jetstream.messages import Appended, SealMarker, seal_headers
from connector.store.published import PublishedSegment, SegmentIdentity
from connector.store.watermark_index import WatermarkIndex

__all__ = ["FetchPayloads", "JetStreamSegment", "LastAppend"]

#: Fetches the payloads of a segment's messages by JetStream sequence, in the order asked.
FetchPayloads = Callable[["JetStreamSegment", Sequence[int]], list[bytes]]


class LastAppend(NamedTuple):
    """A writer's last append message to a segment: its token, end and ingestion time."""

    token: str
    end: int
    time_ms: int


class JetStreamSegment(PublishedSegment):
    """A segment rebuilt from its subject; see the module docstring."""

    def __init__(self, identity: SegmentIdentity, subject: str, fetch: FetchPayloads):
        super().__init__(identity)
        self.subject = subject
        self._fetch = fetch
        #: The JetStream sequence of the subject's last message applied (0: none yet).
        self.last_seq = 0
        # The directory of append messages, in offset order; under `_changed`.
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._seqs: list[int] = []
        self._last_appends: dict[str, LastAppend] = {}
        #: Held by this server's publishes to the segment, so they do not race each other.
        self.publishing = threading.Lock()

    def next_time(self, now_ms: int) -> int:
        """The time of the next temporal operation, strictly after the last one applied.

        Unlike the file store's, this changes nothing: a publish stamped
        with it either lands right after the message the time was read
        from, or fails and is stamped again from the newer state.
        """
        return max(now_ms, self.pending_time + 1)

    # --- applying messages (on the store's event loop) ------------------------------

    def apply_appended(self, seq: int, message: Appended, time_ms: int) -> None:
        """Publishes an append message (stored as JetStream sequence ``seq``)."""
        with self._changed:
            self._starts.append(message.start)
            self._ends.append(message.end)
            self._seqs.append(seq)
        self._last_appends[message.writer_id] = LastAppend(message.token, message.end, time_ms)
        self.apply_commit(
            message.writer_id,
            message.last_event_number,
            message.end,
            time_ms,
            message.checkpoints,
            message.events,
        )

    def apply_marker(self, marker: SealMarker) -> None:
        """Takes in a seal marker: a segment whose appends were purged gets its state from it.

        The seal itself comes with the stream's record right after the
        marker (with the successors, so no reader sees a seal without them).
        """
        self.merge_writer_numbers(marker.writers)
        if self.committed_end < marker.end:
            self._restore_compact(marker.end, marker.time_ms, marker.events)
            with self._changed:
                self._marks = dict(marker.marks)
                self._event_index = EventTimeIndex.restored([-1], [self._event_index.latest])
            self._pending_marks = dict(marker.marks)

    def drop_data(self) -> None:
        """Makes the whole (sealed) segment unreadable and forgets where its messages were.

        Its watermark index keeps only the initial entry and the one at its
        end, so every server, whether it saw the appends or only the seal
        marker a purge left, holds the same index.
        """
        self.truncate(self.committed_end)
        with self._changed:
            counts = self._index.counts()
            events = None if counts is None else counts[-1]
            self._restore_compact_locked(self.committed_end, self.last_write_time, events)
            self._event_index = EventTimeIndex.restored([-1], [self._event_index.latest])

    def _restore_compact(self, end: int, time_ms: int, events: int | None) -> None:
        with self._changed:
            self._restore_compact_locked(end, time_ms, events)
        self._catch_up(end, time_ms)

    def _restore_compact_locked(self, end: int, time_ms: int, events: int | None) -> None:
        initial = initial_watermark(self.creation_time)
        self._index = WatermarkIndex.restored(
            [-1, end - 1],
            [initial, max(initial, time_ms - 1)],
            None if events is None else [0, events],
        )
        self._starts, self._ends, self._seqs = [], [], []
        self.committed_end = end
        self.last_write_time = max(self.last_write_time, time_ms)
        self.head = max(self.head, end)

    # --- the publisher's view ----------------------------------------------------------

    def last_append_of(self, writer_id: str) -> LastAppend | None:
        """The last append message ``writer_id`` stored here, if any."""
        return self._last_appends.get(writer_id)

    def total_events(self) -> int:
        """How many events the segment holds (0 when its index lost count)."""
        with self._changed:
            counts = self._index.counts()
            return 0 if counts is None else counts[-1]

    def writers(self) -> Mapping[str, int]:
        """Every writer's last event number here."""
        return self.writer_numbers()

    def seal_marker_headers(self, time_ms: int) -> dict[str, str]:
        """The headers of this segment's seal marker at ``time_ms``, from its state now."""
        return seal_headers(
            time_ms, self.committed_end, self.total_events(), self.writers(), self.marks()
        )

    # --- reading --------------------------------------------------------------------

    def messages_between(self, start: int, stop: int) -> list[tuple[int, int, int]]:
        """The append messages holding bytes of ``[start, stop)``: (sequence, start, end)."""
        with self._changed:
            first = max(bisect.bisect_right(self._starts, start) - 1, 0)
            last = bisect.bisect_left(self._starts, stop)
            return [
                (self._seqs[i], self._starts[i], self._ends[i])
                for i in range(first, last)
                if self._ends[i] > start
            ]

    def read_bytes(self, start: int, stop: int) -> bytes:
        """The segment's bytes between two offsets, from its messages (cached or fetched)."""
        if stop <= start:
            return b""
        messages = self.messages_between(start, stop)
        payloads = self._fetch(self, [seq for seq, _, _ in messages])
        parts = [
            payload[max(start - begin, 0) : min(stop, end) - begin]
            for payload, (_, begin, end) in zip(payloads, messages, strict=True)
        ]
        return b"".join(parts)

    def bytes_of(self, seqs: Sequence[int]) -> int:
        """The payload bytes of the append messages at ``seqs``."""
        total = 0
        with self._changed:
            for seq in seqs:  # the directory is in sequence order too
                i = bisect.bisect_left(self._seqs, seq)
                if i < len(self._seqs) and self._seqs[i] == seq:
                    total += self._ends[i] - self._starts[i]
        return total

    def directory(self) -> list[tuple[int, int, int]]:
        """Every append message: (sequence, start, end), in offset order (for tests)."""
        with self._changed:
            return list(zip(self._seqs, self._starts, self._ends, strict=True))
