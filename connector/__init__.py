"""Tidemark: a stream store whose readers know how far time has progressed.

The store (:mod:`connector.store`) stamps every write with an ingestion clock
and keeps a watermark index per segment; the server (:mod:`connector.server`)
serves it over gRPC; the client (:mod:`connector.client`) writes and reads.
"""

from connector.client import (
    BytesSerializer,
    EventWriter,
    JsonSerializer,
    StoreClient,
    StreamManager,
    StringSerializer,
    WriterConfig,
)
from connector.clock import Clock, ManualClock, SystemClock
from connector.errors import TidemarkError
from connector.names import SegmentId, StreamId

__all__ = [
    "BytesSerializer",
    "Clock",
    "EventWriter",
    "JsonSerializer",
    "ManualClock",
    "SegmentId",
    "StoreClient",
    "StreamId",
    "StreamManager",
    "StringSerializer",
    "SystemClock",
    "TidemarkError",
    "WriterConfig",
    "embedded_store",
]


def __getattr__(name: str) -> object:
    # Imported on first use: `python -m connector.server` must not import the server twice.
    if name == "embedded_store":
        from connector.embedded import embedded_store

        return embedded_store
    msg = f"module 'connector' has no attribute {name!r}"
    raise AttributeError(msg)
