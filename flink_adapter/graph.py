"""The job graph of the Tidemark source for PyFlink: what a built reader adds to an environment.

    reader = (
        FlinkTidemarkReader.builder()
        .with_store("tidemark://127.0.0.1:7070")
        .for_stream("iot/sensors", start=StreamCut.earliest())
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
watermark follow the rows' ``wm`` column; the watermark rows (those with a
``wm``) are then dropped.
Everything after the readers runs in the JVM, in both time domains: PyFlink's
cost is per row a Python function hands over, so the readers hand over
batches (:func:`~flink_adapter.reading.batch_rows`). Every row shape is
declared once, in :mod:`flink_adapter.rows`.

The stream's rows (:data:`~flink_adapter.rows.OUTPUT_FIELDS`) carry their
event time as the Flink timestamp. In the ingestion-time domain Flink's watermark is the group
watermark less the lag, strictly ascending; in the processing-time domain
(the default) the readers emit no watermark rows, so the assigner, which
ignores a NULL ``wm``, emits no watermark.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pyflink.common import Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.table import StreamTableEnvironment, Table

from flink_adapter.epochs import RECORD_TYPE
from flink_adapter.functions import EpochCoordinator, TaskReader
from flink_adapter.python_mode import configure_job
from flink_adapter.rows import (
    batch_row_type,
    events_query,
    output_type,
    table_schema,
    unnest_query,
)
from flink_adapter.settings import SourceSettings

__all__ = [
    "BUFFER_TIMEOUT_MS",
    "BUNDLE_TIME_MS",
    "WATERMARK_INTERVAL_MS",
    "configure_latency",
    "create_stream",
    "create_table",
    "source_type",
]

#: The Python bundle time set for a job that has none, ms: a reader's rows, and its
#: watermark rows, reach the watermark assigner this soon (PyFlink's default is 1 s).
BUNDLE_TIME_MS = 5
#: The auto-watermark interval set for a job with none, when the source has watermarks,
#: ms: how often the assigner emits (Flink's default is 200 ms).
WATERMARK_INTERVAL_MS = 10
#: The network buffer timeout of the reader operator, ms: how long its rows and watermark
#: rows may wait in a part-full buffer (Flink's default is 100 ms a hop). The
#: coordinator's own output, a few records an epoch, is sent at once. The job's other
#: operators keep the job's buffer timeout.
BUFFER_TIMEOUT_MS = 5
BUNDLE_TIME_KEY = "python.fn-execution.bundle.time"
WATERMARK_INTERVAL_KEY = "pipeline.auto-watermark-interval"


def create_stream(
    settings: SourceSettings,
    env: StreamExecutionEnvironment,
    t_env: StreamTableEnvironment | None = None,
) -> DataStream:
    """Adds the source ``settings`` describe to ``env``; returns its rows (``OUTPUT_FIELDS``).

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

    The columns are ``OUTPUT_FIELDS`` (then any declared JSON fields and
    ``malformed``: :func:`~flink_adapter.rows.output_fields`), ``rt`` the event time as a
    ``TIMESTAMP_LTZ(3)`` rowtime attribute, whose watermark is the group
    watermark less the lag in the ingestion-time domain and none in the
    processing-time domain. Table and SQL jobs use it without a conversion
    to a DataStream and back (each costs the JVM work on every row).

    Job-wide, it sets only what the source would be slow without, and each
    only where the job has no setting of its own (see
    :func:`configure_latency`): the Python bundle time and, in a domain
    with watermarks, the auto-watermark interval. It leaves the Python
    execution mode as the job has it unless the builder's
    ``with_python_execution_mode`` asks for one
    (:func:`~flink_adapter.python_mode.configure_job`). The network buffer
    timeout is set on the source's own operators only.
    """
    # Before any Python function is added: PyFlink picks each one's operator by the mode.
    settings = replace(settings, mode=configure_job(env, settings.python_mode))
    configure_latency(env, t_env, settings.spec.time.has_watermarks)
    parallelism = settings.parallelism or env.get_parallelism()
    prefix = settings.uid_prefix
    tasks = (
        _ticks(settings, env, t_env)
        .key_by(lambda _: 0, key_type=Types.INT())
        .process(EpochCoordinator(settings), output_type=RECORD_TYPE)
        .name(settings.coordinator_name)
        .uid(f"{prefix}-coordinator")
        .set_parallelism(1)
        .set_buffer_timeout(0)
    )
    rows = (
        tasks.broadcast()
        .flat_map(TaskReader(settings), output_type=batch_row_type(settings.spec.deserializer))
        .name(settings.reader_name)
        .uid(f"{prefix}-reader")
        .set_parallelism(parallelism)
        .set_buffer_timeout(BUFFER_TIMEOUT_MS)
    )
    return _with_watermarks(settings, t_env, rows)


def configure_latency(
    env: StreamExecutionEnvironment, t_env: StreamTableEnvironment, watermarks: bool
) -> None:
    """Sets the job-wide settings the source's latency needs, each only where the job has none.

    - ``python.fn-execution.bundle.time`` to :data:`BUNDLE_TIME_MS`: a Python
      function hands its output to the JVM at the end of a bundle, so a
      reader's rows and watermark rows would wait up to PyFlink's 1 s. It is
      PyFlink's one setting for every Python function of the job.
    - ``pipeline.auto-watermark-interval`` to :data:`WATERMARK_INTERVAL_MS`,
      only with ``watermarks``: the Table runtime's assigner emits the
      source's watermark at this interval (Flink's default 200 ms). Without
      watermarks (the processing-time domain) it is left alone.

    A job that sets either itself (in its configuration, its table
    configuration or the cluster's) keeps its value.
    """
    from pyflink.util.java_utils import get_j_env_configuration

    config = get_j_env_configuration(env._j_stream_execution_environment)
    table_config = t_env.get_config().get_configuration()
    if not (config.containsKey(BUNDLE_TIME_KEY) or table_config.contains_key(BUNDLE_TIME_KEY)):
        t_env.get_config().set(BUNDLE_TIME_KEY, str(BUNDLE_TIME_MS))
    if watermarks and not config.containsKey(WATERMARK_INTERVAL_KEY):
        env.get_config().set_auto_watermark_interval(WATERMARK_INTERVAL_MS)


def source_type(settings: SourceSettings) -> Any:
    """The Flink type of the source's rows (:func:`flink_adapter.rows.output_type`)."""
    return output_type(settings.spec.deserializer, settings.json_fields)


def _ticks(
    settings: SourceSettings, env: StreamExecutionEnvironment, t_env: StreamTableEnvironment
) -> DataStream:
    if settings.spec.bounded:
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
    """The readers' rows unnested in the JVM, through the watermark assigner, less ``wm`` rows.

    A watermark can only be declared on a table made from a DataStream, so
    the unnested rows go out to one and back in, as the Table runtime's own
    rows (:func:`_internal_rows`). The last step is SQL
    (:func:`~flink_adapter.rows.events_query`) on purpose: a table made
    from internal rows declares internal Java classes for its columns, and
    a query's columns take the default ones again, so the table converts
    to the usual rows (``String``, ``Instant``) wherever a job turns it into
    a DataStream.
    """
    name = f"tidemark_tasks_{abs(hash(settings.uid_prefix))}"
    t_env.create_temporary_view(name, t_env.from_data_stream(rows))
    unnested = t_env.sql_query(unnest_query(name, settings.json_fields))
    schema = table_schema(settings.spec.deserializer, settings.json_fields)
    timed = t_env.from_data_stream(_internal_rows(t_env, unnested), schema)
    t_env.create_temporary_view(f"{name}_timed", timed)
    return t_env.sql_query(events_query(f"{name}_timed", settings.json_fields))


def _internal_rows(t_env: StreamTableEnvironment, table: Table) -> DataStream:
    """``table``'s rows as a DataStream of the Table runtime's own rows (``RowData``).

    ``to_data_stream`` would turn every value into its Java object (each
    string decoded from UTF-8) and the way back every Java object into the
    runtime's value (each string encoded again, on its first copy): twice
    a row's work for rows that only pass through. PyFlink does not expose
    the target type of Flink's ``toDataStream``, so it is called directly.
    """
    from pyflink.util.java_utils import load_java_class

    row_data = load_java_class("org.apache.flink.table.data.RowData")
    j_table = table._j_table
    j_type = j_table.getResolvedSchema().toPhysicalRowDataType().bridgedTo(row_data)
    return DataStream(t_env._j_tenv.toDataStream(j_table, j_type))
