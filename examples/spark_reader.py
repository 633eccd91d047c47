"""Read a running Tidemark store with Spark: each key's events in event-time order.

    python examples/spark_reader.py --uri tidemark://HOST:7070 --stream iot/sensors
    python examples/spark_reader.py --uri tidemark://HOST:7070 --stream iot/sensors
        --tls-ca-file ca.pem --token-file reader.token --timestamp-field ts --lag '5 seconds'

Reads the stream from its start in the ingestion-time domain (the store's
watermarks, less ``--lag``; event time from the JSON field
``--timestamp-field``, else the ingestion time) and orders each routing
key's events by event time with :func:`spark_adapter.order_by_event_time`:
an event comes out once the watermark passes it, one already behind the
watermark comes out at once flagged late. It prints each one (epoch ms,
UTC time, key, event) until Ctrl-C, or with ``--available-now`` reads what
the stream holds now and stops. ``--output DIR`` writes JSON files there
instead, with Spark's file sink (exactly once, through failures).

Run by ``python``, Spark runs locally; under ``spark-submit --master ...``
on the cluster it names (see docs/spark.md, "Running on a Spark cluster"):
then ``--checkpoint`` and ``--output`` must be directories every machine
reaches at the same path, and so must the credential files.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

__all__ = ["main", "ordered_events"]


def ordered_events(spark: Any, args: argparse.Namespace) -> Any:
    """The streaming DataFrame of the stream's events, ordered per key, with ``late``."""
    from pyspark.sql import functions as F  # noqa: N812

    from spark_adapter import order_by_event_time, with_connector_watermark

    reader = (
        spark.readStream.format("tidemark")
        .option("uri", args.uri)
        .option("stream", args.stream)
        .option("timeDomain", "IngestionTime")
        .option("maxEventTimeLag", args.lag)
    )
    credentials = {
        "tlsCaFile": args.tls_ca_file,
        "tlsCertFile": args.tls_cert_file,
        "tlsKeyFile": args.tls_key_file,
        "tokenFile": args.token_file,
    }
    for option, value in credentials.items():
        if value:
            reader = reader.option(option, value)
    if args.timestamp_field:
        reader = reader.option("deserializer", "json")
        reader = reader.option("timestampField", args.timestamp_field)
    ordered = order_by_event_time(with_connector_watermark(reader.load()))
    return ordered.select(
        "routing_key",
        "event",
        F.unix_millis("event_time").alias("event_time_ms"),
        "late",
    )


def _print_batch(frame: Any, batch_id: int) -> None:
    from connector.clock import utc_text

    for row in frame.collect():
        late = "  late" if row.late else ""
        when = row.event_time_ms
        print(f"{when}  {utc_text(when)}  {row.routing_key}  {row.event}{late}", flush=True)


def main(argv: list[str] | None = None) -> None:
    """Starts the query from the command line and runs it until it stops."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--uri", required=True, help="the store, tidemark://host:port")
    parser.add_argument("--stream", required=True, help="scope/stream")
    parser.add_argument("--tls-ca-file", help="the CA that signed the store's certificate")
    parser.add_argument("--tls-cert-file", help="a client certificate (mutual TLS)")
    parser.add_argument("--tls-key-file", help="its key")
    parser.add_argument("--token-file", help="a file holding a token with 'read' on the scope")
    parser.add_argument("--timestamp-field", help="a JSON field of the events holding event time")
    parser.add_argument("--lag", default="0 seconds", help="how far event time may trail")
    parser.add_argument("--checkpoint", help="the query's checkpoint (default: a new temp dir)")
    parser.add_argument("--output", help="write JSON files to this folder instead of printing")
    parser.add_argument("--available-now", action="store_true", help="read what is there, stop")
    parser.add_argument(
        "--partitions",
        type=int,
        default=4,
        help="tasks ordering the keys (Spark's shuffle partitions; kept in the checkpoint)",
    )
    args = parser.parse_args(argv)

    # Spark's Python workers run this interpreter unless PYSPARK_PYTHON says otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_adapter
    from spark_adapter.session import WORKER_CONFIG

    builder = SparkSession.builder.appName(f"tidemark {args.stream}")
    for key, value in {"spark.ui.showConsoleProgress": "false", **WORKER_CONFIG}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.shuffle.partitions", str(args.partitions))
    spark_adapter.register(spark)
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="tidemark-reader-")
    writer = ordered_events(spark, args).writeStream.option("checkpointLocation", checkpoint)
    if args.output:
        writer = writer.format("json").option("path", args.output)
    else:
        writer = writer.foreachBatch(_print_batch)
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
