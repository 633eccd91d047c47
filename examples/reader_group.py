"""A plain-Python reader group: prints events and watermark advances.

    .venv-spark/bin/python examples/reader_group.py

Two readers share a two-segment stream on an embedded store while a writer
appends; with ingestion-time watermarks on, each reader prints the watermark
whenever the group's rises.
"""

from __future__ import annotations

import threading
import time

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager, embedded_store
from connector.clock import utc_text
from connector.reader import ReaderConfig, ReaderGroupManager, TimeDomain


def main(seconds: float = 3.0) -> None:
    """Runs the example for ``seconds``."""
    with embedded_store(max_watermark_lag_ms=300, polling_period_ms=100) as uri:
        client = StoreClient(uri)
        StreamManager(client).create_scope("example")
        StreamManager(client).create_stream("example", "clicks", segment_count=2)
        group = ReaderGroupManager(client).create_reader_group(
            "example", "printers", ["example/clicks"]
        )
        config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME, max_event_time_lag=100)
        stop = threading.Event()

        def read(name: str) -> None:
            with group.create_reader(name, JsonSerializer(), config) as reader:
                while not stop.is_set():
                    read = reader.read_next_event(200)
                    if read is None:
                        continue
                    if read.is_watermark:
                        mark = read.watermark
                        print(f"[{name}] watermark -> {mark}  {utc_text(mark)}")
                    else:
                        print(f"[{name}] {read.event} from {read.position.segment}")

        threads = [threading.Thread(target=read, args=(f"reader-{i}",)) for i in (1, 2)]
        for thread in threads:
            thread.start()
        with EventWriter(client, "example/clicks", JsonSerializer()) as writer:
            deadline = time.monotonic() + seconds / 2
            n = 0
            while time.monotonic() < deadline:
                writer.write_event({"user": f"u{n % 4}", "n": n}, routing_key=f"u{n % 4}")
                writer.flush()
                n += 1
                time.sleep(0.1)
        time.sleep(seconds / 2)  # idle: watermarks keep moving with no writes
        stop.set()
        for thread in threads:
            thread.join()
        client.close()


if __name__ == "__main__":
    main()
