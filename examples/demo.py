"""The main demo: sensors write to an embedded store and a reader watches time pass.

    make demo

Runs on an embedded store (a real gRPC server in this process, over a
temporary directory). The engine adapters replace this demo as they land.
"""

from __future__ import annotations

import json
import time

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager, embedded_store
from connector.framing import iter_frames


def main() -> None:
    """Writes three sensors' readings and reads each segment back with its watermarks."""
    with embedded_store(max_watermark_lag_ms=200, polling_period_ms=50) as uri:
        client = StoreClient(uri)
        manager = StreamManager(client)
        manager.create_scope("demo")
        description = manager.create_stream("demo", "sensors", segment_count=2)
        print(f"store at {uri}; stream demo/sensors with {len(description.segments)} segments")
        writer = EventWriter(client, "demo/sensors", JsonSerializer())
        for reading in range(3):
            for sensor in ("A", "B", "C"):
                writer.write_event({"sensor": sensor, "reading": reading}, routing_key=sensor)
            writer.flush()
            time.sleep(0.05)
        writer.close()
        for segment in description.segments:
            result = client.read(segment.segment, 0)
            for frame in iter_frames(result.data):
                print(f"{segment.segment} @{frame.offset}: ingested {frame.ingestion_time} "
                      f"{json.loads(frame.payload)}")
            print(f"{segment.segment}: watermark after the data {result.watermark}")
            tail = client.read(segment.segment, result.next_offset, wait_ms=2_000,
                               known_watermark=result.watermark)
            print(f"{segment.segment}: idle tick moved the watermark to {tail.watermark} "
                  f"(+{tail.watermark - result.watermark} ms)")
        client.close()


if __name__ == "__main__":
    main()
