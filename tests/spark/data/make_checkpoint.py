"""Writes the fixture of ``tests/spark/test_spark_compat.py``: a query's checkpoint and its store.

Not run by the tests: it made ``checkpoint_9325655/`` once, with the code of
commit 9325655 (main when the source package of issue 26 was begun), so the
test restarts today's source from a checkpoint the earlier one wrote::

    .venv-spark/bin/python tests/spark/data/make_checkpoint.py tests/spark/data/checkpoint_9325655

On a store with a synthetic clock: stream ``compat/events`` of 2 segments,
6 events, segment 0 split into 2 and 3, 6 more events, the clock moved on
and idle ticks taken; a streaming query (JSON events, IngestionTime with a
100 ms lag, 4 events per trigger, into ``foreachBatch``) reads them all and
stops; then 6 events more, which the checkpoint has not seen. ``written.json``
names the events of both parts (``read``, ``unread``).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys

from pyspark.sql import SparkSession

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.server import StoreServer
from connector.store import StoreConfig

CLOCK_START_MS = 1_700_000_000_000
#: Two routing keys in each of segments 2 and 3 (the halves of 0) and in segment 1.
KEYS = ["k13", "k7", "k2", "k11", "k0", "k4"]


def main(target: pathlib.Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    clock = ManualClock(CLOCK_START_MS)
    config = StoreConfig(
        data_dir=str(target / "store"), clock=clock, polling_period_ms=None, max_watermark_lag_ms=0
    )
    server = StoreServer(config, listen="127.0.0.1:0").start()
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("compat")
    StreamManager(client).create_stream("compat", "events", segment_count=2)

    def write(seq: int) -> list[dict[str, object]]:
        events = [{"key": key, "seq": seq, "ts": clock.now_ms()} for key in KEYS]
        with EventWriter(client, "compat/events", JsonSerializer()) as writer:
            for event in events:
                writer.write_event(event, routing_key=str(event["key"]))
        clock.advance(50)
        server.store.advance_idle_segments()
        return events

    read = write(0)
    client.scale_stream("compat", "events", [0], split_count=2)
    read += write(1)
    clock.advance(1_000)
    server.store.advance_idle_segments()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    import spark_adapter

    spark_adapter.register(spark)
    query = (
        spark.readStream.format("tidemark")
        .option("uri", server.uri)
        .option("stream", "compat/events")
        .option("deserializer", "json")
        .option("timeDomain", "IngestionTime")
        .option("maxEventTimeLag", "100 milliseconds")
        .option("timestampField", "ts")
        .option("maxEventsPerTrigger", "4")
        .load()
        .writeStream.foreachBatch(lambda frame, batch_id: frame.collect())
        .option("checkpointLocation", str(target / "checkpoint"))
        .start()
    )
    query.processAllAvailable()
    query.stop()
    spark.stop()

    unread = write(2)
    (target / "written.json").write_text(json.dumps({"read": read, "unread": unread}, indent=1))
    client.close()
    server.stop()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
