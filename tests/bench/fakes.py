"""Made-up figures for each benchmark, to render its template without running it.

One builder per benchmark name; each imports the benchmark's module, so a
builder runs only where its engine is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Seconds of a timed phase.
_S = 1.25


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


def store_load() -> Any:
    from bench import store_load_bench as b

    seconds = {"none": [0.002, 0.003], "parked": [0.004, 0.005]}
    parked = b.ParkedResult(1_000, 0.4, 0.2, dict(seconds), dict(seconds))
    mixed = b.MixedResult(60.0, 250_000, 249_000, [], [0.03, 0.07], 0, 0, 0)
    return b.StoreLoadFigures(2_000, 16, 8, 10, 4, parked, mixed)


def jetstream() -> Any:
    from bench import jetstream_bench as b

    def phase(nats: float) -> Any:
        cpu = {"client": 0.9, "server": 1.1, **{f"nats n{i}": nats for i in (1, 2, 3)}}
        return b.Phase(100_000, _S, cpu)

    rounds = [
        b.Round(system, phase(nats), phase(nats), [1.5, 9.5])
        for _ in range(2)
        for system, nats in (("file", 0.0), ("jetstream", 0.5))
    ]
    return b.JetStreamFigures(100_000, 2, rounds, [6.3, 8.8], ("grpcio 1",))


FAKES: dict[str, Callable[[], Any]] = {
    "store": store,
    "store_load": store_load,
    "jetstream": jetstream,
}
