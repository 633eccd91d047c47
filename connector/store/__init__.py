"""The segment store: durable segments with ingestion-time watermarks (PDP 26).

:class:`Storage` is the seam the server works against; :func:`open_storage`
opens the storage a configuration names: :class:`SegmentStore` (files in a
data dir, :class:`StoreConfig`) by default, or the JetStream store
(:mod:`connector.store.jetstream`, a replicated NATS JetStream cluster,
``JetStreamConfig``).
"""

from connector.store.config import StorageConfig, StoreConfig, StoreObserver
from connector.store.file.store import SegmentStore
from connector.store.storage import Storage, open_storage

__all__ = [
    "SegmentStore",
    "Storage",
    "StorageConfig",
    "StoreConfig",
    "StoreObserver",
    "open_storage",
]
