"""A reader's fetch session: many segments read in one call that waits once (ReadSegments).

The server's session remembers each segment's cursor, so a call names only
what changed on this side (segments added, moved, re-armed or released) and
is answered with what changed on the store's (see ``ReadSegments`` in
``proto/store.proto`` and :mod:`connector.server.fetch_sessions`).
:class:`FetchSession` keeps the same cursors on this side: each segment's
offset and the watermarks the reader was told, and whether it is armed. So
when the server says the session is gone (:class:`~connector.errors.FetchSessionError`:
an answer lost on the way, a request repeated, the server restarted, or
another server answering after a reconnect), it opens a new session with
every armed cursor, from what this side received: nothing is read twice and
nothing is skipped.

Flow control: a segment answered with data is disarmed, on both sides, until
the reader calls :meth:`FetchSession.rearm` (it consumed the data); a segment
answered with a watermark only stays armed.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector._proto import store_pb2 as _pb
from connector.client.connection import StoreClient, failure_error, read_result
from connector.errors import ClosedError, FetchSessionError, TidemarkError
from connector.model import FetchPosition, FetchResult, ReadResult

__all__ = ["FetchSession"]


@dataclass
class _Cursor:
    """A segment as this side knows it: where its reader is, and its arming."""

    position: FetchPosition
    armed: bool = True
    #: Whether the server's session holds it as it stands here (else the next call sends it).
    sent: bool = False
    #: Disarmed by an answer, and since re-armed here: the next call re-arms it there.
    rearmed: bool = False

    def message(self, segment: str) -> _pb.Cursor:
        position = self.position
        known = position.known_watermark
        return _pb.Cursor(
            segment=segment,
            offset=position.offset,
            known_watermark=known,
            known_event_time_watermark=None if known is None else position.known_event_time,
        )


class FetchSession:
    """One reader's cursors over many segments, read through one ReadSegments session.

    Not thread-safe: one thread at a time adds, re-arms, releases and
    fetches. Close it when done (closing twice is harmless).

    Args:
        client: the connection to the store.
        max_bytes: the data one answer carries at most (0: the server's
            default, 8 MiB; at most 16 MiB).
        max_bytes_per_segment: one segment's data in an answer (0: 1 MiB).
    """

    def __init__(self, client: StoreClient, max_bytes: int = 0, max_bytes_per_segment: int = 0):
        self._client = client
        self._max_bytes = max_bytes
        self._max_bytes_per_segment = max_bytes_per_segment
        self.session_id = 0
        self.epoch = 0
        self._cursors: dict[str, _Cursor] = {}
        #: Added or re-armed since the last answer (a dict as an ordered set): the next call
        #: sends them, so a call costs what changed here, not every cursor.
        self._unsent: dict[str, None] = {}
        self._released: set[str] = set()
        self._closed = False

    # --- what is read ------------------------------------------------------------

    @property
    def segments(self) -> tuple[str, ...]:
        """The segments in the session, in the order they were added."""
        return tuple(self._cursors)

    def position(self, segment: str) -> FetchPosition:
        """Where ``segment``'s reader is, and the watermarks it was told there."""
        return self._cursors[segment].position

    def armed(self, segment: str) -> bool:
        """Whether ``segment`` is armed (False: answered with data, not re-armed since)."""
        return self._cursors[segment].armed

    def add(
        self,
        segment: str,
        offset: int,
        known_watermark: int | None = None,
        known_event_time: int | None = None,
    ) -> None:
        """Reads ``segment`` from ``offset`` (armed), from the next :meth:`fetch` on.

        A segment in the session already moves there. Without
        ``known_watermark`` the next answer tells its watermarks at once;
        with it, the segment is answered once there is data, a watermark
        above it or another event time than ``known_event_time``.
        """
        self._check_open()
        self._released.discard(segment)
        self._cursors[segment] = _Cursor(FetchPosition(offset, known_watermark, known_event_time))
        self._unsent[segment] = None

    def rearm(self, segment: str) -> None:
        """Arms ``segment`` again: its reader consumed the data of its last answer."""
        cursor = self._cursors[segment]
        if not cursor.armed:
            cursor.armed = True
            cursor.rearmed = True
            self._unsent[segment] = None

    def release(self, segment: str) -> None:
        """Stops reading ``segment``; unknown segments are ignored."""
        cursor = self._drop(segment)
        if cursor is not None and self.session_id:
            self._released.add(segment)

    # --- fetching -----------------------------------------------------------------

    def fetch(self, wait_ms: int = 0) -> FetchResult:
        """What is new in the armed segments; waits up to ``wait_ms`` (30 s at most) for it.

        Sends what changed here since the last call; opens the session
        again with every armed cursor if the server lost it.

        Raises:
            ResourceExhaustedError: a limit of the server's (sessions,
                segments per session, cursors, parked calls), named.
            StoreUnavailableError: the store could not be reached (the
                session is opened again on the next call if need be).
        """
        self._check_open()
        try:
            return self._fetch_once(wait_ms, reopened=False)
        except FetchSessionError:
            self._forget_session()
            return self._fetch_once(wait_ms, reopened=True)

    def _fetch_once(self, wait_ms: int, reopened: bool) -> FetchResult:
        sent = self._sent_cursors()
        request = _pb.ReadSegmentsRequest(
            session_id=self.session_id,
            session_epoch=self.epoch,
            cursors=[self._message(name) for name in sent],
            released=sorted(self._released) if self.session_id else (),
            max_bytes=self._max_bytes,
            max_bytes_per_segment=self._max_bytes_per_segment,
            wait_ms=wait_ms,
        )
        response = self._client.read_segments(request, wait_ms)
        self.session_id, self.epoch = response.session_id, response.session_epoch
        self._released.clear()
        for name in sent:
            cursor = self._cursors[name]
            cursor.sent, cursor.rearmed = True, False
            self._unsent.pop(name, None)
        reads = tuple(read_result(r) for r in response.reads)
        for read in reads:
            self._told(read)
        failures = tuple((f.segment, failure_error(f.error)) for f in response.failures)
        for name, _ in failures:
            self._drop(name)
        return FetchResult(reads, failures, reopened)

    def _sent_cursors(self) -> list[str]:
        """The segments whose cursor the next request carries."""
        if not self.session_id:  # a new session: every armed cursor
            return [name for name, c in self._cursors.items() if c.armed]
        cursors = self._cursors
        return [
            name
            for name in self._unsent
            if (c := cursors.get(name)) is not None and c.armed and (c.rearmed or not c.sent)
        ]

    def _message(self, name: str) -> _pb.Cursor:
        cursor = self._cursors[name]
        if cursor.sent and cursor.rearmed:
            return _pb.Cursor(segment=name)  # the server holds where it is
        return cursor.message(name)

    def _told(self, read: ReadResult) -> None:
        if read.end_of_segment:
            self._drop(read.segment)
            return
        cursor = self._cursors.get(read.segment)
        if cursor is None:
            return
        cursor.position = cursor.position.after(read)
        if read.data:  # disarmed, there as here, until re-armed
            cursor.armed = False

    def _drop(self, segment: str) -> _Cursor | None:
        """Forgets ``segment`` here; its cursor, if it had one."""
        self._unsent.pop(segment, None)
        return self._cursors.pop(segment, None)

    def _forget_session(self) -> None:
        """The server lost the session: every cursor goes with the next one it opens."""
        self.session_id = self.epoch = 0
        self._released.clear()
        for cursor in self._cursors.values():
            cursor.sent = cursor.rearmed = False

    # --- lifecycle --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            msg = "the fetch session is closed"
            raise ClosedError(msg)

    def close(self) -> None:
        """Closes the server's session (best effort); closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        if self.session_id:
            request = _pb.ReadSegmentsRequest(
                session_id=self.session_id, session_epoch=self.epoch, close=True
            )
            try:
                self._client.read_segments(request)
            except TidemarkError:  # it expires on its own
                pass
        self._cursors.clear()
        self._unsent.clear()

    def __enter__(self) -> FetchSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.session_id}, epoch={self.epoch}, segments={len(self._cursors)})"
        )
