"""Tidemark: a stream store whose readers know how far time has progressed.

The store (:mod:`connector.store`) stamps every write with an ingestion clock
and keeps a watermark index per segment; the server (:mod:`connector.server`)
serves it over gRPC; the client (:mod:`connector.client`) writes and reads.

The names below are imported on first use, so importing a part of the
package (``python -m connector.server``, the ``tidemarkctl`` command) does
not import gRPC before that part has set it up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    from connector.embedded import embedded_store
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

#: Where each name of ``__all__`` lives.
_HOMES = {
    **dict.fromkeys(
        [
            "BytesSerializer",
            "EventWriter",
            "JsonSerializer",
            "StoreClient",
            "StreamManager",
            "StringSerializer",
            "WriterConfig",
        ],
        "connector.client",
    ),
    **dict.fromkeys(["Clock", "ManualClock", "SystemClock"], "connector.clock"),
    "embedded_store": "connector.embedded",
    "TidemarkError": "connector.errors",
    **dict.fromkeys(["SegmentId", "StreamId"], "connector.names"),
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'connector' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
