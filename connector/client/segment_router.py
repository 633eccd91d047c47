"""Which open segment of a stream takes an event: the segment owning its routing position.

A stream's open segments split the routing-key space [0, 1) between them
(:func:`~connector.client.routing.key_position` places a key in it). After
scaling seals a segment, :meth:`SegmentRouter.refresh` learns the
successors that took over its range from the store.
"""

from __future__ import annotations

from bisect import bisect_right

from connector.client.connection import StoreClient
from connector.errors import FailedPreconditionError
from connector.model import SegmentDescription
from connector.names import StreamId

__all__ = ["SegmentRouter"]


class SegmentRouter:
    """Routes positions of the routing-key space to the open segments of ``stream``.

    Raises:
        FailedPreconditionError: (on creation and :meth:`refresh`) the
            stream is sealed: no segment takes events any more.
    """

    def __init__(self, client: StoreClient, stream: StreamId):
        self.stream = stream
        self._client = client
        self._segments: tuple[SegmentDescription, ...] = ()
        self._lows: list[float] = []
        self.refresh()

    @property
    def segments(self) -> tuple[SegmentDescription, ...]:
        """The open segments as the store last described them, by the key range they own."""
        return self._segments

    def segment_for(self, position: float) -> str:
        """The open segment owning ``position`` (in [0, 1)) as last described."""
        return self._segments[bisect_right(self._lows, position) - 1].segment

    def open_names(self) -> frozenset[str]:
        """The names of the open segments as last described."""
        return frozenset(s.segment for s in self._segments)

    def refresh(self) -> None:
        """Asks the store for the stream's open segments again (after one was found sealed)."""
        description = self._client.describe_stream(self.stream.scope, self.stream.stream)
        if not description.open_segments:
            msg = f"stream {str(self.stream)!r} is sealed: it takes no more events"
            raise FailedPreconditionError(msg)
        self._segments = description.open_segments
        self._lows = [s.key_low for s in self._segments]

    def __repr__(self) -> str:
        return f"SegmentRouter({str(self.stream)!r}, {[s.segment for s in self._segments]})"
