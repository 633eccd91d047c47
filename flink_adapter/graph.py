"""The job graph of the Tidemark source for PyFlink: what a built reader adds to an environment.

    reader = (
        FlinkTidemarkReader.builder()
        .with_store("tidemark://127.0.0.1:7070")
        .for_stream("iot/sensors", start=StartPosition.earliest())
        .with_deserialization_schema("json")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(timedelta(seconds=5))
        .with_parallelism(2)
        .build()
    )
    readings = reader.create_stream(env)

PyFlink runs no Python source and no Python watermark generator, so the
source is a small graph (see :mod:`flink_adapter.functions`): a tick a
second (Flink's ``datagen``; a one-element collection for a bounded read)
into the coordinator, which plans an epoch every ``epoch_interval_ms`` on a
processing-time timer, its tasks broadcast to the readers, and the readers' rows
(batches of events, and watermark rows) unnested into one row per event, then
through the Table runtime's watermark assigner, which makes Flink's
watermark follow the rows' ``wm`` column; the ``wm`` rows are then dropped.
Everything after the readers runs in the JVM, in both time domains: PyFlink's
cost is per row a Python function hands over, so the readers hand over
batches (:func:`~flink_adapter.reading.batched`).

The stream's rows (:data:`OUTPUT_FIELDS`) carry their event time as the Flink
timestamp. In the ingestion-time domain Flink's watermark is the group
watermark less the lag, strictly ascending; in the processing-time domain
(the default) the readers emit no watermark rows, so the assigner, which
ignores a NULL ``wm``, emits no watermark.
"""

from __future__ import annotations

from typing import Any

from pyflink.common import Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.table import DataTypes, Schema, StreamTableEnvironment, Table
from pyflink.table.expressions import col, lit

from flink_adapter.functions import EVENT_FIELDS, EpochCoordinator, TaskReader, reader_row_type
from flink_adapter.settings import SourceSettings

__all__ = [
    "BUFFER_TIMEOUT_MS",
    "BUNDLE_TIME_MS",
    "OUTPUT_FIELDS",
    "WATERMARK_INTERVAL_MS",
    "create_stream",
    "create_table",
    "output_type",
]

#: The fields of the source's rows, in order.
OUTPUT_FIELDS = (
    "routing_key",
    "event",
    "event_time",
    "late",
    "segment",
    "offset",
    "ingestion_time",
)

#: The Python bundle time the builder sets, ms: rows reach the watermark assigner this soon.
BUNDLE_TIME_MS = 5
#: The auto-watermark interval the builder sets, ms: how often the assigner emits.
WATERMARK_INTERVAL_MS = 10
#: The network buffer timeout the builder sets, ms: how long records and watermarks may
#: wait in a part-full buffer between tasks (Flink's default is 100 ms a hop). The
#: coordinator's own output, a few records an epoch, is sent at once.
BUFFER_TIMEOUT_MS = 5


def create_stream(
    settings: SourceSettings,
    env: StreamExecutionEnvironment,
    t_env: StreamTableEnvironment | None = None,
) -> DataStream:
    """Adds the source ``settings`` describe to ``env``; returns its rows (:data:`OUTPUT_FIELDS`).

    :func:`create_table` as a DataStream: each row's event time is its Flink
    timestamp, and the table's watermark is the stream's.
    """
    t_env = t_env or StreamTableEnvironment.create(env)
    return t_env.to_data_stream(create_table(settings, env, t_env))


def create_table(
    settings: SourceSettings,
    env: StreamExecutionEnvironment,
    t_env: StreamTableEnvironment,
) -> Table:
    """Adds the source ``settings`` describe to ``env``; returns it as a table of ``t_env``.

    The columns are :data:`OUTPUT_FIELDS`, then ``rt``: the event time as a
    ``TIMESTAMP_LTZ(3)`` rowtime attribute, whose watermark is the group
    watermark less the lag in the ingestion-time domain and none in the
    processing-time domain. Table and SQL jobs use it without a conversion
    to a DataStream and back (each costs the JVM work on every row).

    Sets the job's Python bundle time, auto-watermark interval and network
    buffer timeout to :data:`BUNDLE_TIME_MS`, :data:`WATERMARK_INTERVAL_MS`
    and :data:`BUFFER_TIMEOUT_MS` (latency over batching; set them again
    afterwards to trade back).
    """
    config = t_env.get_config()
    config.set("python.fn-execution.bundle.time", str(BUNDLE_TIME_MS))
    env.get_config().set_auto_watermark_interval(WATERMARK_INTERVAL_MS)
    env.set_buffer_timeout(BUFFER_TIMEOUT_MS)
    parallelism = settings.parallelism or env.get_parallelism()
    prefix = settings.uid_prefix
    tasks = (
        _ticks(settings, env, t_env)
        .key_by(lambda _: 0, key_type=Types.INT())
        .process(EpochCoordinator(settings), output_type=Types.STRING())
        .name("tidemark-coordinator")
        .uid(f"{prefix}-coordinator")
        .set_parallelism(1)
        .set_buffer_timeout(0)
    )
    rows = (
        tasks.broadcast()
        .flat_map(TaskReader(settings), output_type=reader_row_type(settings.deserializer))
        .name("tidemark-reader")
        .uid(f"{prefix}-reader")
        .set_parallelism(parallelism)
    )
    return _with_watermarks(settings, t_env, rows)


def output_type(settings: SourceSettings) -> Any:
    """The Flink type of the source's rows."""
    event = (
        Types.PRIMITIVE_ARRAY(Types.BYTE()) if settings.deserializer == "bytes" else Types.STRING()
    )
    kinds = [
        Types.STRING(),
        event,
        Types.LONG(),
        Types.BOOLEAN(),
        Types.STRING(),
        Types.LONG(),
        Types.LONG(),
    ]
    return Types.ROW_NAMED(list(OUTPUT_FIELDS), kinds)


def _ticks(
    settings: SourceSettings, env: StreamExecutionEnvironment, t_env: StreamTableEnvironment
) -> DataStream:
    if settings.bounded:
        return env.from_collection([0], type_info=Types.INT()).set_parallelism(1)
    # One tick a second: the ticks only start the coordinator's epoch timer and keep the
    # job unbounded (a source that ends would pass Long.MAX_VALUE as the watermark).
    table = f"tidemark_ticks_{abs(hash(settings.uid_prefix))}"
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {table} (n BIGINT) WITH ("
        "'connector'='datagen', 'rows-per-second'='1', 'scan.parallelism'='1')"
    )
    return t_env.to_data_stream(t_env.from_path(table))


def _with_watermarks(
    settings: SourceSettings, t_env: StreamTableEnvironment, rows: DataStream
) -> Table:
    """The readers' rows unnested in the JVM, through the watermark assigner, less ``wm`` rows."""
    view = f"tidemark_tasks_{abs(hash(settings.uid_prefix))}"
    t_env.create_temporary_view(view, t_env.from_data_stream(rows))
    fields = ", ".join(f"`{name}`" for name in EVENT_FIELDS)
    # A watermark row has no events: the LEFT JOIN keeps it, its event time its watermark.
    unnested = t_env.sql_query(
        "SELECT t.kind, e.routing_key, e.event, COALESCE(e.event_time, t.wm) AS event_time, "
        "t.wm, e.late, t.segment, e.`offset`, e.ingestion_time, "
        "TO_TIMESTAMP_LTZ(COALESCE(e.event_time, t.wm), 3) AS rt "
        f"FROM {view} AS t LEFT JOIN UNNEST(t.events) AS e({fields}) ON TRUE"
    )
    event = DataTypes.BYTES() if settings.deserializer == "bytes" else DataTypes.STRING()
    schema = (
        Schema.new_builder()
        .column("kind", DataTypes.STRING())
        .column("routing_key", DataTypes.STRING())
        .column("event", event)
        .column("event_time", DataTypes.BIGINT())
        .column("wm", DataTypes.BIGINT())
        .column("late", DataTypes.BOOLEAN())
        .column("segment", DataTypes.STRING())
        .column("offset", DataTypes.BIGINT())
        .column("ingestion_time", DataTypes.BIGINT())
        .column("rt", DataTypes.TIMESTAMP_LTZ(3))
        .watermark("rt", "TO_TIMESTAMP_LTZ(wm, 3)")
        .build()
    )
    table = t_env.from_data_stream(t_env.to_data_stream(unnested), schema)
    return table.filter(col("kind") != lit("wm")).select(
        *(col(name) for name in OUTPUT_FIELDS), col("rt")
    )
