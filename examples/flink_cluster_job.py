"""A stream copied to files by a Flink cluster, exactly once: a job for ``flink run -py``.

    flink run -d -py examples/flink_cluster_job.py --uri tidemark://HOST:7070
        --stream iot/sensors --output file:///data/sensors   (one command line)

Submitted to a running cluster (a standalone one started with the
``start-cluster.sh`` that apache-flink ships, say), the job reads the stream
from its start with :class:`flink_adapter.FlinkTidemarkReader` at parallelism
``--parallelism`` and writes each event, one per line as the store holds it,
to part files under ``--output``. Flink's ``FileSink`` finishes a part file
only when the checkpoint that covers it completes, and the reader's positions
live in the same checkpoints, so after any failure (a TaskManager lost, say)
the finished files hold every event exactly once. Checkpoints are taken every
``--checkpoint-ms``; the cluster's configuration says where they are kept and
how the job restarts.

Every machine that runs a TaskManager needs Python with this package
installed (``python.executable`` in the cluster's configuration names it).
"""

from __future__ import annotations

import argparse
from typing import Any

from pyflink.common import Encoder, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy

from flink_adapter import FlinkTidemarkReader

__all__ = ["copy_stream", "main"]


def copy_stream(env: Any, uri: str, stream: str, output: str, parallelism: int) -> None:
    """Adds the job to ``env``: the events of ``stream`` into finished part files in ``output``."""
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream(stream)
        .with_deserialization_schema("string")
        .with_parallelism(parallelism)
        .uid("tidemark-source")
        .build()
    )
    sink = (
        FileSink.for_row_format(output, Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .build()
    )
    events = reader.create_stream(env).map(lambda row: row[1], output_type=Types.STRING())
    events.sink_to(sink).uid("files").name("part files")


def main(argv: list[str] | None = None) -> None:
    """Builds the job from the command line and submits it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--uri", required=True, help="the store, tidemark://host:port")
    parser.add_argument("--stream", required=True, help="scope/stream")
    parser.add_argument("--output", required=True, help="folder URI of the part files")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--checkpoint-ms", type=int, default=1_000)
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(args.checkpoint_ms)
    copy_stream(env, args.uri, args.stream, args.output, args.parallelism)
    env.execute(f"tidemark {args.stream} to files")


if __name__ == "__main__":
    main()
