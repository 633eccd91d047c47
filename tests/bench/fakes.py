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


def nemesis() -> Any:
    from bench import nemesis_bench as b

    cycles = [b.Cycle(kind, 0, 2.5, 6.25) for kind in ("leader_kill", "quorum_loss")]
    cycles.append(b.Cycle("server_kill", 1, 1.5, float("nan")))
    answers = {"written": 200, "not written": 50, "unknown": 5}
    problems = ["w0's key-1 read out of order"]
    return b.NemesisFigures(
        1, 12.0, 2, cycles, 1_000, 1_000, 1_000, 0, 0, answers, 0, 99.5, problems, ("grpcio 1",)
    )


def reader() -> Any:
    from bench import reader_bench as b
    from bench._support import Timing
    from connector.reader import TimeDomain

    runs = [
        b.ReadRun(300_000, Timing(_S, 1.1, 0.05), domain, 16)
        for domain in (TimeDomain.PROCESSING_TIME, TimeDomain.INGESTION_TIME)
    ]
    steady = {"appends": 2_000, "events": 10_000, "rate": 999.0, "late_ticks": 0}
    steady |= {"watermark_reads": 1_999, "min": 5.2, "delivery_n": 1_999}
    steady |= {"delivery_p50": 4.3, "delivery_p99": 11.2}
    idle = {"watermark_reads": 15, "mean_gap_ms": 1_000.0, "max_gap_ms": 1_200.0, "max": 1_185.9}
    return b.ReaderFigures(
        events=300_000,
        event_size=100,
        repetitions=1,
        batch=10,
        interval_ms=10,
        steady_seconds=10.0,
        idle_lag_ms=1_000,
        idle_polling_ms=200,
        idle_seconds=15.0,
        throughput=b.Throughput(runs, 0.25, [("reader.py:read_next_event", 0.5)]),
        steady=b.Latencies([10.2, 12.5], 1, steady),
        idle=b.Latencies([510.5, 1_045.9], 2, idle),
        software=("grpcio 1",),
    )


def event_time() -> Any:
    from bench import event_time_bench as b

    runs = [b._Run(asserting, 300_000, 2_000 * asserting, 8.0) for asserting in (True, False)]
    return b.EventTimeFigures(
        writers=4,
        batch=100,
        seconds=8.0,
        repetitions=1,
        assert_every_ms=10,
        compact_after=1_000,
        latency_seconds=10.0,
        interval_ms=10,
        throughput=[b.Asserting(how, runs) for how in b.HOW],
        journal=b.Journal(30.0, 3_000, 300, [(0.1, 1_000), (0.2, 2_500)], 49_407, 151),
        latency=b.Latency(1_000, 999, [1.1, 6.7]),
    )


def percentile() -> Any:
    from bench import percentile_bench as b

    def story(name: str) -> Any:
        outcomes = (
            b.Outcome("p=1", (30_000.0, 30_001.0), 400, 0),
            b.Outcome("p=0.9", (533.0, 540.0), 400, 39),
            b.Outcome("bounded 5 s", (5_033.0,), 400, 40),
        )
        return b.Story(name, "event time", 400, outcomes)

    return b.PercentileFigures(
        seed=1,
        ticks=40,
        tick_ms=100,
        segments=8,
        events=5,
        burst=20,
        backlog_ticks=10,
        capacity=60,
        writers=10,
        stragglers=1,
        delay_ms=500,
        straggler_delay_ms=30_000,
        percentiles=(1.0, 0.9),
        bounds_ms=(5_000,),
        segment=story("straggler segment"),
        writer=story("straggler writers"),
        software=("grpcio 1",),
    )


def spark() -> Any:
    from bench import spark_bench as b

    parts = dict.fromkeys(b.PARTS, 0.5)
    runs = [
        b.Run(pair, system, query, 4.0, 900_000, 20.0, 11, parts, "10 batches", 9, parts, 2.0)
        for pair in (1, 2)
        for query, system in b.PLAN
    ]
    floor = (11.0, {**parts, "triggerExecution": 8.0})
    loads = [(1.5, 1.25), (1.25, 1.0)]
    return b.SparkFigures(1_000_000, 10, 100_000, 25_000, 2, 30.1, loads, floor, runs, ("x",))


def spark_latency() -> Any:
    from bench import spark_latency_bench as b

    return b.SparkLatencyFigures(100, 40.0, 5_000, [8.5, 11.5], [1.25, 1.5])


def spark_profile() -> Any:
    from bench import spark_profile_bench as b

    found = [
        {"system": system, "wall": 10.0, "steady": 100_000.0, "roles": {"JVM": 5.5}}
        for system in ("tidemark", "file")
    ]
    stages = {"frame decoding": 0.2, "the whole task path": 1.25}
    return b.SparkProfileFigures(1_000_000, stages, found, ("pyspark 4",))


def event_time_spark() -> Any:
    from bench import event_time_spark_bench as b

    return b.SparkLatencies(100, 45.0, [294.0, 750.0], batch=0.25)


def event_time_flink() -> Any:
    from bench._event_time_engines import EngineLatencies

    return EngineLatencies(100, 45.0, [199.0, 991.0])


def _scale_cells(parts: tuple[str, ...]) -> list[Any]:
    from bench._scale_grid import Cell, Setup

    figures = {"p50_ms": 12.5, "p99_ms": 250.0, "max_ms": 900.0, "missed": 1, "watermarks": 9}
    figures |= {"wm_behind_p50_s": 0.04, "wm_behind_max_s": 27.5, "latest_offset_p50_ms": 57.0}
    figures |= {"latest_offset_max_ms": 1_250.0, "batch_p50_ms": 332.0, "batch_max_ms": 990.0}
    figures |= {"batch_working_p50_ms": 120.0}
    figures |= {"reports": 3, "batches": 2, "epoch_s": 0.07, "flink_behind_store_max_s": 6.8}
    figures |= {"planning_p50_ms": 12.0, "planning_max_ms": 40.0, "waited_p50_ms": 240.0}
    cells = []
    for part in parts:
        for storage in ("file", "jetstream"):
            setup = Setup(storage, "one", 4_096)
            percent = {"server": 1.55, "client": 94.0} | (
                {"nats": 2.5} if storage != "file" else {}
            )
            calls = {"DescribeTails": 2.0, "ReadSegments": 4.25}
            cells.append(Cell(part, setup.label, 4_096, "idle", percent, calls, dict(figures)))
        cells.append(Cell(part, "file, 256 × 16", 4_096, "writes", {"server": 9.5}, {}, {}))
    return cells


def scale() -> Any:
    from bench import scale_bench as b
    from bench._scale_grid import Cell, Skipped

    cells = _scale_cells(("a", "b", "c"))
    cells += [
        Cell("peers", s, 4_096, "idle", {"server": 1.1, "client": 0.55}) for s in ("redis", "nats")
    ]
    skipped = [Skipped("jetstream, 1 × 16,384", "refused: over the limit of 999")]
    return b.ScaleFigures(
        [16, 4_096], ["file", "jetstream"], ["one", "many"], ["idle", "writes"], 5.0, 20.0,
        cells, skipped, 4_500.0, 4_321.0, ("grpcio 1",), list(b.PARTS), 50, 200,
    )  # fmt: skip


def scale_flink() -> Any:
    from bench import scale_flink_bench as b
    from bench._scale_grid import Skipped

    skipped = [Skipped("jetstream, 1 × 16,384", "refused: over the limit of 999")]
    return b.ScaleFlinkFigures(
        [16, 4_096], ["file", "jetstream"], ["one", "many"], ["idle", "writes"], 5.0, 20.0,
        _scale_cells(("d",)), skipped, 2_100.0, 1_999.0, ("apache-flink 2",),
    )  # fmt: skip


def flink() -> Any:
    from bench import flink_bench as b

    cpu = dict.fromkeys(b.PROCESSES, 5.5)
    runs = [b.Throughput(job.label, 1_000, 4.0, 100_000.0, cpu) for job in b.JOBS]
    latency = b.Latency(1_000, 30.0, [0.053, 0.098], 0)
    return b.FlinkFigures(1_000_000, 16, 5, 300_000, 500_000, 76_462.0, runs, latency, ("x",))


FAKES: dict[str, Callable[[], Any]] = {
    "store": store,
    "store_load": store_load,
    "jetstream": jetstream,
    "nemesis": nemesis,
    "reader": reader,
    "event_time": event_time,
    "percentile": percentile,
    "spark": spark,
    "spark_latency": spark_latency,
    "spark_profile": spark_profile,
    "event_time_spark": event_time_spark,
    "flink": flink,
    "event_time_flink": event_time_flink,
    "scale": scale,
    "scale_flink": scale_flink,
}
