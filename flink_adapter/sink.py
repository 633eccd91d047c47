"""A Tidemark sink for PyFlink: rows appended to a stream, the job's watermark asserted there.

``FlinkTidemarkWriter.builder()`` (after the Pravega connector's
``FlinkPravegaWriter``): the store, the stream, how each row becomes an
event and a routing key, and ``with_watermark_assertion()`` (Pravega's
``enableWatermark(true)``). :meth:`FlinkTidemarkWriter.sink` keys the rows
by routing key and writes them with one :class:`~connector.client.EventWriter`
per subtask (:class:`StoreWriterFunction`), whose writer id is the prefix
and the subtask's index.

**At least once, not exactly once.** PyFlink 2.3 runs no Python sink: its
``Sink`` and ``SinkFunction`` wrap Java classes, and a Python function gets
no checkpoint hook (no ``snapshot_state``, no ``notify_checkpoint_complete``,
nothing at the end of a bundle). So a Python sink can neither commit with a
checkpoint (two-phase, as Pravega's transactional writer does) nor learn
which rows a checkpoint covered. Deduplicating a replay by the store's event
numbers would need every row to come back to its subtask in the same order
after a restore; Flink replays the same rows, but how rows from several
upstream subtasks interleave at a subtask depends on timing, and a replay
whose numbers fell on other rows would lose events, not just repeat them. So:

- each row is appended and durable before ``process_element`` returns (a
  Python operator finishes its bundle before a checkpoint's snapshot), so a
  completed checkpoint never covers a row that is not in the store: none
  is lost;
- each start of a subtask (a restore too) is a new incarnation of its
  writer id (:func:`incarnation`: its numbers start above any the last one
  used), so rows replayed after a restore are appended again: a row may be
  stored twice, once per run that wrote it (at least once);
- within a run every call is retried with the same numbers, so a lost
  answer or a store restart never stores a row twice.

One append a row is the price: a subtask writes a few thousand rows a
second, bound by the round trip to the store. Two jobs writing one stream
need different writer id prefixes.

With ``with_watermark_assertion()`` every subtask asserts Flink's watermark
in force there (:meth:`EventWriter.note_time`), before a row when it rose,
and on a tick a second broadcast to every subtask, so a subtask that has no
rows joins too and holds the watermark where its later rows could land:
the rows it writes afterwards have timestamps above it, unless Flink calls
them late. The events' own event time (what readers' timestamp assigners
take from the payload) must be the rows' Flink timestamps for this to
hold. Closing marks the subtask's writer idle (a bounded job's, as it
ends; a cancelled job's functions are not always closed: writers left
active leave by the store's ``--writer-idle-timeout-ms``). A restore starts Flink's
watermark over, and a writer's assertions never fall: the restored subtask
asserts again once its watermark passes what it asserted before the
failure, and rows it replays meanwhile at or below that are late to
readers (at least once has its price).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream.functions import KeyedBroadcastProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor
from pyflink.table import StreamTableEnvironment

from connector.client import BytesSerializer, EventWriter, StoreClient
from connector.client.connection import parse_uri
from connector.errors import InvalidArgumentError, TidemarkError
from connector.names import StreamId
from connector.security.credentials import ClientCredentials, split_uri
from connector.stages import StageLink, record_stage
from connector.timestamps import END_OF_TIME
from flink_adapter.python_mode import THREAD, mode_of, subtask_of
from flink_adapter.store_thread import StoreThread

__all__ = [
    "FlinkTidemarkWriter",
    "FlinkTidemarkWriterBuilder",
    "SinkSettings",
    "StoreWriterFunction",
    "incarnation",
]

_log = logging.getLogger(__name__)
SERIALIZATIONS = ("bytes", "string", "json")


@dataclass(frozen=True)
class SinkSettings:
    """A checked sink: where it writes, how a row becomes an event, whether it asserts.

    ``event`` and ``routing_key`` pick a field of each row: a name (Rows and
    mappings) or an index (tuples and Rows); ``event`` None takes the row
    itself, ``routing_key`` None writes without a key.
    """

    uri: str
    stream: StreamId
    serialization: str = "bytes"
    event: str | int | None = None
    routing_key: str | int | None = None
    assert_watermarks: bool = False
    writer_id_prefix: str = "flink"
    stage_inputs: tuple[str, ...] = ()

    def stage(self) -> StageLink:
        """The job as a stage of a pipeline: its inputs, its output, its subtasks' writers."""
        return StageLink(
            name=f"{self.writer_id_prefix}@{self.stream.stream}",
            engine="flink",
            inputs=self.stage_inputs,
            output=str(self.stream),
            writer=self.writer_id_prefix,
            writer_is_prefix=True,
        )


def _pick(value: Any, field: str | int | None) -> Any:
    if field is None:
        return value
    try:
        return value[field]
    except (KeyError, IndexError, TypeError):
        msg = f"row {value!r:.120} has no field {field!r}"
        raise InvalidArgumentError(msg) from None


def _encoder(serialization: str) -> Callable[[Any], bytes]:
    def encode(event: Any) -> bytes:
        if serialization == "json":
            return json.dumps(event, separators=(",", ":")).encode()
        if serialization == "string":
            if not isinstance(event, str):
                msg = f"the string schema writes str events, got {type(event).__name__}"
                raise InvalidArgumentError(msg)
            return event.encode()
        if not isinstance(event, (bytes, bytearray)):
            msg = f"the bytes schema writes bytes events, got {type(event).__name__}"
            raise InvalidArgumentError(msg)
        return bytes(event)

    return encode


class StoreWriterFunction(KeyedBroadcastProcessFunction):
    """Appends each row (durable before the next); asserts the watermark; see the module.

    The rows come keyed by routing key; the ticks come broadcast, so every
    subtask follows the watermark, also one that has no rows.
    """

    def __init__(self, settings: SinkSettings):
        self.settings = settings

    def open(self, runtime_context: RuntimeContext) -> None:
        """Connects as this subtask's writer, a new incarnation of its id (see the module)."""
        settings = self.settings
        # subtask_of: PyFlink's own index call fails in thread mode.
        self.writer_id = f"{settings.writer_id_prefix}-{subtask_of(runtime_context).index}"
        # Every store call on a thread of its own: in thread mode a gRPC call from the task's
        # thread can wait forever (see flink_adapter.store_thread).
        self._store = StoreThread("tidemark-sink-store")
        self._client = self._store.call(StoreClient, settings.uri)
        self._writer: EventWriter[bytes] = self._store.call(
            lambda: EventWriter(
                self._client,
                settings.stream,
                BytesSerializer(),
                writer_id=self.writer_id,
                numbers_from=incarnation(),
            )
        )
        self._encode = _encoder(settings.serialization)
        self._thread_mode = mode_of(runtime_context) == THREAD

    def process_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext
    ) -> Any:
        """Appends the row's event; it is durable when this returns."""
        settings = self.settings
        key = _pick(value, settings.routing_key) if settings.routing_key is not None else None
        if settings.assert_watermarks:
            self._follow(self._watermark_of(ctx))  # joins before its first row
        self._store.call(self._write, self._encode(_pick(value, settings.event)), key)
        yield from ()

    def process_broadcast_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.Context
    ) -> Any:
        """A tick: asserts the watermark if it rose."""
        if self.settings.assert_watermarks:
            self._follow(self._watermark_of(ctx))
        yield from ()

    def _watermark_of(self, ctx: Any) -> int:
        """The operator's current watermark, in either Python execution mode.

        In thread mode PyFlink 2.3 hands this function the context of its
        keyed co-process operator, which has no ``currentWatermark`` (its
        ``current_watermark()`` fails with ``AttributeError``); its timer
        service has it.
        """
        if self._thread_mode:
            return int(ctx._j_context.timerService().currentWatermark())  # noqa: SLF001
        return int(ctx.current_watermark())

    def _follow(self, watermark: int) -> None:
        """Asserts ``watermark`` when it rose above the writer's latest assertion."""
        if not 0 <= watermark < END_OF_TIME:
            return  # none yet, or the end of a bounded job (closing marks the writer idle)
        asserted = self._writer.asserted  # stored, or refused: asserting it again changes nothing
        if asserted is not None and watermark <= asserted:
            return
        try:
            self._store.call(self._writer.note_time, watermark)
        except InvalidArgumentError as refused:
            # Below what an earlier incarnation of this subtask asserted (a restore starts
            # Flink's watermark over): asserted again once the watermark passes it.
            _log.info("%s: %s", self.writer_id, refused)

    def close(self) -> None:
        """Flushes and marks this subtask's writer idle (if it asserted); closes the connection."""
        try:
            self._store.call(self._writer.close)
        finally:
            self._store.call(self._client.close)
            self._store.close()

    def _write(self, event: bytes, key: str | None) -> None:
        """On the store thread: appends ``event``; durable on return."""
        self._writer.write_event(event, key)
        self._writer.flush()


def incarnation() -> int:
    """The first event number of a subtask's writer started now: microseconds since the epoch.

    Above every number an earlier start of the same subtask used, as long as
    it wrote fewer events to a segment than microseconds went by.
    """
    return time.time_ns() // 1_000


class FlinkTidemarkWriter:
    """A built Tidemark sink; :meth:`sink` adds it to a job."""

    def __init__(self, settings: SinkSettings):
        self.settings = settings

    @staticmethod
    def builder() -> FlinkTidemarkWriterBuilder:
        """A new builder."""
        return FlinkTidemarkWriterBuilder()

    def sink(self, stream: Any, parallelism: int | None = None, bounded: bool = False) -> Any:
        """Writes ``stream``'s rows, keyed by routing key; returns the writing operator's stream.

        Rows of one key go to one subtask and are stored in the order they
        reach it. At least once (see the module docstring). With
        ``with_watermark_assertion()`` the job records itself in the store
        as a stage of a pipeline (``tidemarkctl pipeline``), here, as the
        job is set up: a failure to is logged, never raised. ``bounded``:
        ``stream`` ends, and so does the sink's tick (one instead of one a
        second), so the job ends with it and closing marks the writers idle.
        """
        settings = self.settings
        field = settings.routing_key

        def key_of(row: Any) -> str:
            return "" if field is None else str(_pick(row, field) or "")

        if settings.assert_watermarks:
            _record_stage(settings)
        keyed = stream.key_by(key_of, key_type=Types.STRING())
        ticks = _ticks(stream.get_execution_environment(), settings, bounded)
        descriptor = MapStateDescriptor("tidemark-sink-ticks", Types.INT(), Types.INT())
        written = keyed.connect(ticks.broadcast(descriptor)).process(StoreWriterFunction(settings))
        if parallelism is not None:
            written = written.set_parallelism(parallelism)
        return written.name("tidemark-sink").uid(f"{settings.writer_id_prefix}-tidemark-sink")

    def __repr__(self) -> str:
        return f"FlinkTidemarkWriter(stream={str(self.settings.stream)!r})"


def _record_stage(settings: SinkSettings) -> None:
    """Records the job's stage link (:meth:`SinkSettings.stage`); logs a failure to."""
    try:
        with StoreClient(settings.uri) as client:
            record_stage(client, settings.stage())
    except TidemarkError as error:
        _log.warning("the job's stage is not recorded: %s: %s", type(error).__name__, error)


class _EndOfTime(TimestampAssigner):
    """Stamps the ticks at the end of time, so their watermark never holds the rows' back."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return END_OF_TIME - 1


def _ticks(env: Any, settings: SinkSettings, bounded: bool) -> Any:
    """A tick a second (Flink's ``datagen``; one for a bounded job), watermarked the end of time."""
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_EndOfTime())
    # Made in either case: locally, a table environment is what points PyFlink's workers at
    # this interpreter (python.executable), as the source's does.
    t_env = StreamTableEnvironment.create(env)
    if bounded:
        one = env.from_collection([0], type_info=Types.INT()).set_parallelism(1)
        return one.assign_timestamps_and_watermarks(strategy)
    table = f"tidemark_sink_ticks_{abs(hash(settings.writer_id_prefix))}"
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {table} (n BIGINT) WITH ("
        "'connector'='datagen', 'rows-per-second'='1', 'scan.parallelism'='1')"
    )
    return (
        t_env.to_data_stream(t_env.from_path(table))
        .map(lambda _row: 0, output_type=Types.INT())
        .assign_timestamps_and_watermarks(strategy)
    )


class FlinkTidemarkWriterBuilder:
    """Collects a sink's options; :meth:`build` checks them and returns the writer."""

    def __init__(self) -> None:
        self._uri: str | None = None
        self._credentials: ClientCredentials | None = None
        self._stream: str | None = None
        self._options: dict[str, Any] = {}

    def with_store(
        self, uri: str, credentials: ClientCredentials | None = None
    ) -> FlinkTidemarkWriterBuilder:
        """The store's URI (``tidemark://host:port``) and, if need be, its credentials' files."""
        self._uri, self._credentials = uri, credentials
        return self

    def for_stream(self, name: str) -> FlinkTidemarkWriterBuilder:
        """Writes to stream ``name`` (``scope/stream``)."""
        self._stream = name
        return self

    def with_serialization_schema(self, name: str) -> FlinkTidemarkWriterBuilder:
        """``bytes`` (the default), ``string`` or ``json`` (the event is dumped as JSON)."""
        self._options["serialization"] = name
        return self

    def with_event_field(self, field: str | int) -> FlinkTidemarkWriterBuilder:
        """The row's field that is the event (by default the row itself)."""
        self._options["event"] = field
        return self

    def with_routing_key_field(self, field: str | int) -> FlinkTidemarkWriterBuilder:
        """The row's field that is the routing key (by default none)."""
        self._options["routing_key"] = field
        return self

    def with_watermark_assertion(self, enabled: bool = True) -> FlinkTidemarkWriterBuilder:
        """Asserts the job's watermark on the stream as it rises (Pravega's ``enableWatermark``)."""
        self._options["assert_watermarks"] = enabled
        return self

    def with_stage_inputs(self, *streams: str) -> FlinkTidemarkWriterBuilder:
        """The streams the job reads (``scope/stream``), for its record as a stage.

        With ``with_watermark_assertion()``, ``tidemarkctl pipeline`` shows
        the job as a stage from these streams to this one; its input
        watermark is their writers' asserted event time (the job keeps its
        position in Flink's state, not in the store). For a job reading with
        a :class:`~flink_adapter.FlinkTidemarkReader` ``reader``:
        ``with_stage_inputs(*reader.settings.spec.stream_names)``.
        """
        self._options["stage_inputs"] = streams
        return self

    def with_writer_id_prefix(self, prefix: str) -> FlinkTidemarkWriterBuilder:
        """What the subtasks' writer ids start with (``flink`` by default), to find them later."""
        self._options["writer_id_prefix"] = prefix
        return self

    def build(self) -> FlinkTidemarkWriter:
        """Checks every option, naming a bad one; returns the writer.

        Raises:
            InvalidArgumentError: an option is missing or bad.
        """
        if self._uri is None:
            msg = "with_store(uri) is required"
            raise InvalidArgumentError(msg)
        parse_uri(self._uri)
        if self._stream is None:
            msg = "for_stream(name) is required"
            raise InvalidArgumentError(msg)
        stream = StreamId.parse(self._stream)
        base, in_uri = split_uri(self._uri)
        credentials = in_uri.merged(self._credentials) if self._credentials else in_uri
        query = credentials.to_query()
        uri = f"{base}?{query}" if query else base
        options = dict(self._options)
        serialization = options.get("serialization", "bytes")
        if serialization not in SERIALIZATIONS:
            msg = f"with_serialization_schema: {serialization!r} is not one of {SERIALIZATIONS}"
            raise InvalidArgumentError(msg)
        for name in ("event", "routing_key"):
            field = options.get(name)
            if field is not None and (not isinstance(field, (str, int)) or isinstance(field, bool)):
                msg = f"with_{name}_field: a field name or index, got {field!r}"
                raise InvalidArgumentError(msg)
        prefix = options.get("writer_id_prefix", "flink")
        if not isinstance(prefix, str) or not 0 < len(prefix) <= 128:
            msg = f"with_writer_id_prefix: 1 to 128 characters, got {prefix!r}"
            raise InvalidArgumentError(msg)
        inputs = options.get("stage_inputs", ())
        try:
            options["stage_inputs"] = tuple(str(StreamId.parse(name)) for name in inputs)
        except InvalidArgumentError as error:
            msg = f"with_stage_inputs: {error}"
            raise InvalidArgumentError(msg) from None
        if not isinstance(options.get("assert_watermarks", False), bool):
            msg = "with_watermark_assertion: True or False"
            raise InvalidArgumentError(msg)
        return FlinkTidemarkWriter(SinkSettings(uri=uri, stream=stream, **options))
