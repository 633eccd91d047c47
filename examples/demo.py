"""The engine-free demo: the seed's EventTimeITCase sensors on an embedded store.

    python -m examples.demo                 # the ingestion-time domain: C is late
    python -m examples.demo --event-time    # the sensors assert their event time

Sensors A (on time), B (early) and C (late: slow) write readings for a few
seconds; a reader in the ingestion-time domain, with the event time taken
from each reading's ``ts`` and a max event-time lag, feeds an event-time
orderer, which prints A's and B's readings in event-time order, each
watermark before the readings it releases, and reports C's as late (never
dropped).

With ``--event-time`` each sensor writes with a writer of its own that
asserts its event time after each reading (seed 002), and the reader reads
in the event-time domain: the watermark waits for C and nothing is late;
halfway C marks itself idle, and the watermark moves on without it.
Runs on an embedded store (a real gRPC server in this process, over a
temporary directory).
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from connector import (
    EventWriter,
    JsonSerializer,
    StoreClient,
    StreamManager,
    SystemClock,
    embedded_store,
)
from connector.reader import FieldTimestampAssigner, ReaderConfig, ReaderGroupManager, TimeDomain
from examples.sensors import (
    LAG_MS,
    LiveOrdering,
    join_asserting,
    late_line,
    reading_line,
    run_sensors,
    watermark_line,
    write_asserting_round,
)


def _advanced(watermark: int, released: list[dict[str, Any]]) -> None:
    print(watermark_line(watermark))
    for r in released:
        print(reading_line(r["ts"], r["sensor"], r["seq"]))


def _late(r: dict[str, Any]) -> None:
    print(late_line(r["ts"], r["sensor"], r["seq"]))


def main(rounds: int = 10) -> None:
    """Writes ``rounds`` readings per sensor and prints the ordered output.

    Each watermark that releases readings is printed before them; late
    readings are reported as they are read. Times are epoch milliseconds
    with the UTC time beside them.
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s - %(message)s")
    with embedded_store(max_watermark_lag_ms=200, polling_period_ms=50) as uri:
        client = StoreClient(uri)
        StreamManager(client).create_scope("demo")
        StreamManager(client).create_stream("demo", "sensors", segment_count=2)
        config = ReaderConfig(
            time_domain=TimeDomain.INGESTION_TIME,
            timestamp_assigner=FieldTimestampAssigner("ts"),
            max_event_time_lag=LAG_MS,
        )
        group = ReaderGroupManager(client).create_reader_group("demo", "ordering", ["demo/sensors"])
        reader = group.create_reader("demo-reader", JsonSerializer(), config)
        print(f"store at {uri}; lag {LAG_MS} ms; sensors A on time, B early, C late")
        while (reader.last_watermark or 0) < SystemClock().now_ms() - LAG_MS - 500:
            reader.read_next_event(100)  # live: see the idle stream's watermark first
        with EventWriter(client, "demo/sensors", JsonSerializer()) as writer:
            output = run_sensors(
                writer,
                reader,
                SystemClock().now_ms,
                pause=lambda: time.sleep(0.2),
                rounds=rounds,
                on_advance=_advanced,
                on_late=_late,
            )
        print(
            f"released {len(output.released)} readings in event-time order, "
            f"reported {len(output.late)} late ones (all from sensor "
            f"{''.join(sorted({r['sensor'] for r in output.late}))}), "
            f"{len(output.watermarks)} watermark advances"
        )
        reader.close()
        client.close()


def main_event_time(rounds: int = 10) -> None:
    """The sensors assert their own event time; C marks itself idle halfway."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s - %(message)s")
    with embedded_store(max_watermark_lag_ms=200, polling_period_ms=50) as uri:
        client = StoreClient(uri)
        StreamManager(client).create_scope("demo")
        StreamManager(client).create_stream("demo", "sensors", segment_count=2)
        config = ReaderConfig(
            time_domain=TimeDomain.EVENT_TIME, timestamp_assigner=FieldTimestampAssigner("ts")
        )
        group = ReaderGroupManager(client).create_reader_group("demo", "ordering", ["demo/sensors"])
        reader = group.create_reader("demo-reader", JsonSerializer(), config)
        writers = {
            s: EventWriter(client, "demo/sensors", JsonSerializer(), writer_id=f"sensor-{s}")
            for s in "ABC"
        }
        print(f"store at {uri}; event-time domain: each sensor asserts its own event time")
        live = LiveOrdering(reader, lambda: time.sleep(0.2), on_advance=_advanced, on_late=_late)
        join_asserting(writers, SystemClock().now_ms)  # each holds the watermark from the start
        for seq in range(rounds):
            sensors = "ABC" if seq < rounds // 2 else "AB"
            if seq == rounds // 2:
                writers["C"].mark_idle()
                print("sensor C marks itself idle: the watermark moves on without it")
            live.output.written.extend(
                write_asserting_round(writers, seq, SystemClock().now_ms, sensors)
            )
            time.sleep(0.2)
            live.read_all_written()
        for writer in writers.values():
            writer.close()
        client.seal_stream("demo", "sensors")  # the end: the readings still held are due
        live.read_until_settled()
        output = live.output
        print(
            f"released {len(output.released)} readings in event-time order, "
            f"{len(output.late)} late, {len(output.watermarks)} watermark advances"
        )
        reader.close()
        client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m examples.demo")
    parser.add_argument(
        "--event-time", action="store_true", help="the sensors assert their own event time"
    )
    if parser.parse_args().event_time:
        main_event_time()
    else:
        main()
