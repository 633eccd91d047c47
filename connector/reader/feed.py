"""What a reader's held segments bring: one fetch session, one waiting call for all of them.

:class:`SegmentFeed` keeps every segment a reader holds in one
:class:`~connector.client.fetch_session.FetchSession` (``ReadSegments``): a
call names only what changed on the reader's side (segments taken, re-armed
or given back) and waits once, until the first held segment has something
new (data, a watermark rise, another writers' event time, its seal), so an
idle reader costs one parked call whatever the number of its segments.

Flow control is the session's: a segment answered with data waits until its
reader consumed the data and calls :meth:`SegmentFeed.rearm`; so each segment
has one answer buffered at most, and an answer is always applied to an empty
buffer, as one read at a time did.

A session the server lost (an answer lost on the way, the server restarted)
is opened again with every armed cursor, from what the reader received: no
event is read twice or skipped (:meth:`FetchSession.fetch`).

End cuts: the session reads a segment as far as its data goes; an answer
past a segment's end cut is cut there (:func:`cut_at`) and the segment leaves
the session, since nothing beyond is read.
"""

from __future__ import annotations

import math

from connector._wire import MAX_WAIT_MS
from connector.client.connection import StoreClient
from connector.client.fetch_session import FetchSession
from connector.framing import iter_frames
from connector.model import FetchResult, ReadResult

__all__ = ["SegmentFeed", "cut_at"]


def cut_at(read: ReadResult, end: int) -> ReadResult:
    """``read`` without its events at or past ``end`` (an event boundary in it).

    What holds at ``end`` is what is safe there: the next event (the first
    cut off) was ingested at some time ``t``, and events are ingested in
    order, so ``t - 1`` is the watermark; the writers' event time is the
    least in force at any of the read's events (its floor), which is at
    most the one in force at ``end``. A read that does not pass ``end`` is
    returned as it is.
    """
    if read.next_offset <= end:
        return read
    kept = end - read.offset
    first_cut = next(iter_frames(read.data[kept:], end))
    return ReadResult(
        segment=read.segment,
        offset=read.offset,
        next_offset=end,
        data=read.data[:kept],
        watermark=first_cut.ingestion_time - 1,
        end_of_segment=False,
        event_time_watermark=read.event_time_floor,
        event_time_floor=read.event_time_floor,
    )


class SegmentFeed:
    """The reads of the segments one reader holds, through one fetch session.

    Not thread-safe: the reader's thread holds, re-arms, releases and waits.
    Closing twice is harmless.

    Args:
        client: the connection to the store.
        max_bytes_per_segment: one segment's data in one answer at most.
    """

    def __init__(self, client: StoreClient, max_bytes_per_segment: int):
        self._session = FetchSession(client, max_bytes_per_segment=max_bytes_per_segment)
        #: The segments in the session, with their end cuts (None: read to the seal).
        self._ends: dict[str, int | None] = {}

    @property
    def idle(self) -> bool:
        """Whether no segment is in the session: nothing can come."""
        return not self._ends

    def hold(
        self,
        segment: str,
        offset: int,
        end: int | None,
        known_watermark: int | None,
        known_event_time: int | None,
    ) -> None:
        """Reads ``segment`` from ``offset`` up to ``end`` (None: its seal), from the next wait on.

        ``known_watermark`` and ``known_event_time`` (the store's form: None
        for no active writer) are what the reader knows at ``offset``: the
        segment is answered once something differs. Without
        ``known_watermark`` the next answer tells both. A segment at its end
        cut already is not read.
        """
        if end is not None and offset >= end:
            return
        self._session.add(segment, offset, known_watermark, known_event_time)
        self._ends[segment] = end

    def rearm(self, segment: str) -> None:
        """Reads ``segment`` on: its reader consumed the data of its last answer.

        A segment no longer in the session (at its end, failed, given back) is ignored.
        """
        if segment in self._ends:
            self._session.rearm(segment)

    def release(self, segment: str) -> None:
        """Stops reading ``segment``; one not in the session is ignored."""
        if segment in self._ends:
            del self._ends[segment]
            self._session.release(segment)

    def wait(self, timeout_s: float) -> FetchResult:
        """What is new in the held segments; waits up to ``timeout_s`` for it.

        Each read is a segment's data from where its reader was (cut at its
        end cut), or no data and other watermarks, or its end. A segment
        that failed, with the error its own read would have raised, has left
        the session (:meth:`hold` it again to try again).

        Raises:
            StoreUnavailableError: the store could not be reached (the
                session is opened again by the next wait if need be).
            ResourceExhaustedError: a limit of the server's, named.
        """
        wait_ms = min(MAX_WAIT_MS, max(0, math.ceil(timeout_s * 1000)))
        result = self._session.fetch(wait_ms)
        reads = tuple(self._within_end(read) for read in result.reads)
        for segment, _ in result.failures:
            self._ends.pop(segment, None)
        return FetchResult(reads, result.failures, result.reopened)

    def _within_end(self, read: ReadResult) -> ReadResult:
        segment = read.segment
        end = self._ends.get(segment)
        if read.end_of_segment:
            self._ends.pop(segment, None)  # it left the session
        if end is None or read.next_offset < end:
            return read
        self.release(segment)  # nothing past the end cut is read
        return cut_at(read, end)

    def close(self) -> None:
        """Closes the session on the server (best effort: it expires anyway)."""
        self._ends.clear()
        self._session.close()

    def __repr__(self) -> str:
        return f"SegmentFeed({self._session!r})"
