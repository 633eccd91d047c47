"""The store served over gRPC.

- :mod:`.store_server`: :class:`StoreServer`, a store and its gRPC server on an event loop.
- :mod:`.servicer`: the async servicer, a thin layer over a :class:`~connector.store.Storage`.
- :mod:`.parked_reads`: calls waiting without a thread for a change, capped per connection.
- :mod:`.many_segments`: DescribeTails, ReadSegments and PlanReads, over many segments a call.
- :mod:`.fetch_sessions`: ReadSegments' fetch sessions, their cursors, epochs and limits.
- :mod:`.status` and :mod:`.messages`: errors as statuses, answers as messages.
- :mod:`.cli`: ``python -m connector.server`` and ``tidemark-server``.
"""

from connector.server.cli import main
from connector.server.servicer import SegmentStoreServicer
from connector.server.status import status_of
from connector.server.store_server import StoreServer, is_loopback

__all__ = ["SegmentStoreServicer", "StoreServer", "is_loopback", "main", "status_of"]
