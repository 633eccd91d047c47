"""An embedded store: the real server, in this process, on a free localhost port."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from connector.clock import Clock, SystemClock
from connector.server import StoreServer
from connector.store import StoreConfig

__all__ = ["embedded_store"]


@contextmanager
def embedded_store(
    data_dir: str | None = None,
    *,
    clock: Clock | None = None,
    max_watermark_lag_ms: int = 10_000,
    polling_period_ms: int | None = 1_000,
) -> Iterator[str]:
    """Serves a store over gRPC on ``127.0.0.1`` for the ``with`` block; yields its URI.

    Engine workers in other processes connect to it by that URI. With no
    ``data_dir`` the store lives in a temporary directory removed afterwards.
    ``max_watermark_lag_ms`` and ``polling_period_ms`` are the server's
    ``--idle-tick-after-ms`` and ``--polling-period-ms``.
    """
    with tempfile.TemporaryDirectory(prefix="tidemark-") as scratch:
        config = StoreConfig(
            data_dir=data_dir or scratch,
            clock=clock or SystemClock(),
            max_watermark_lag_ms=max_watermark_lag_ms,
            polling_period_ms=polling_period_ms,
        )
        with StoreServer(config, listen="127.0.0.1:0") as server:
            yield server.uri
