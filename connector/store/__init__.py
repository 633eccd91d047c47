"""The segment store: durable segments with ingestion-time watermarks (PDP 26)."""

from connector.store.store import SegmentStore, StoreConfig, StoreObserver

__all__ = ["SegmentStore", "StoreConfig", "StoreObserver"]
