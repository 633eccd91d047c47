"""Made-up figures for each benchmark, to render its template without running it.

One builder per benchmark name; each imports the benchmark's module, so a
builder runs only where its engine is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def store() -> Any:
    from bench import store_bench as b
    from bench._support import Timing

    def phase(seconds: float) -> Any:
        return b.Phase(1_000, Timing(seconds, 0.5, None), 100_000)

    return b.StoreFigures(
        events=1_000,
        event_size=100,
        batch_bytes=1 << 20,
        batch_events=20_000,
        routing_key="k1",
        read_bytes=1 << 20,
        redis_batch=10_000,
        redis_page=10_000,
        redis_server="7.0.15",
        tidemark=b.Result("tidemark", phase(0.004), phase(0.002)),
        redis=b.Result("redis", phase(0.008), phase(0.004)),
        software=("grpcio 1", "redis-py 5"),
    )


FAKES: dict[str, Callable[[], Any]] = {
    "store": store,
}
