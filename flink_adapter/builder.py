"""The FlinkPravegaReader-style builder of a :class:`FlinkTidemarkReader`, and that reader.

Every ``with_*`` method returns the builder; :meth:`build` maps the options
to the reader core's :class:`~connector.reader.source.ReadSpec` (which checks
them, naming the builder's methods: :data:`FLINK_NAMES`) and checks Flink's
own knobs, raising :class:`~connector.errors.InvalidArgumentError` naming
the option, before any job is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from connector._wire import MAX_WAIT_MS
from connector.errors import InvalidArgumentError
from connector.names import validate_name
from connector.reader.events import TimeDomain, to_millis
from connector.reader.progress_watch import DEFAULT_STALL_LOG_AFTER_MS
from connector.reader.source import OptionNames, ReadSpec, StreamCut, StreamRead, probe_store
from connector.security.credentials import ClientCredentials
from flink_adapter import graph
from flink_adapter.epochs import (
    MAX_EPOCH_BYTES,
    MAX_EPOCH_EVENTS,
    MAX_TASK_BYTES,
    MAX_TASK_EVENTS,
)
from flink_adapter.json_fields import OPTION as JSON_FIELDS_OPTION
from flink_adapter.json_fields import declared_fields
from flink_adapter.python_mode import MODES
from flink_adapter.rows import OUTPUT_FIELDS
from flink_adapter.settings import EPOCH_INTERVAL_MS, IDLE_WAIT_MS, SourceSettings

__all__ = ["FLINK_NAMES", "FlinkTidemarkReader", "FlinkTidemarkReaderBuilder"]

#: How the reader core's read specification names the builder's options in errors.
FLINK_NAMES = OptionNames.of(
    {
        "store": "with_store",
        "streams": "for_stream",
        "start": "for_stream start",
        "end": "for_stream end",
        "time_domain": "with_time_domain",
        "max_event_time_lag": "with_max_event_time_lag",
        "watermark_percentile": "with_watermark_percentile",
        "timestamp_field": "with_timestamp_assigner",
        "timestamp_assigner": "with_timestamp_assigner",
        "deserializer": "with_deserialization_schema",
        "budget": "with_epoch_budget",
        "task_size": "with_read_task_size",
        "call_timeout": "with_event_read_timeout",
    }
)


class FlinkTidemarkReader:
    """A built Tidemark source: checked settings; :meth:`create_stream` adds it to a job.

    (:meth:`create_table` adds it as a Table, for Table and SQL jobs.)

    The stream's rows (:data:`~flink_adapter.graph.OUTPUT_FIELDS`) carry their
    event time as the Flink timestamp. In the ingestion-time domain Flink's
    watermark is the group watermark less the lag, strictly ascending; in the
    processing-time domain (the default) the source emits no watermark.
    """

    def __init__(self, settings: SourceSettings):
        self.settings = settings

    @staticmethod
    def builder() -> FlinkTidemarkReaderBuilder:
        """A new builder (see the module docstring)."""
        return FlinkTidemarkReaderBuilder()

    def create_stream(self, env: Any, t_env: Any = None) -> Any:
        """Adds the source to ``env`` (a StreamExecutionEnvironment); returns its DataStream.

        See :func:`flink_adapter.graph.create_stream` for the job settings it sets.
        """
        return graph.create_stream(self.settings, env, t_env)

    def create_table(self, env: Any, t_env: Any) -> Any:
        """Adds the source to ``env``; returns it as a Table of ``t_env``, a StreamTableEnvironment.

        The columns of :data:`~flink_adapter.graph.OUTPUT_FIELDS`, then ``rt``,
        the event time as a rowtime attribute carrying the watermark (see
        :func:`flink_adapter.graph.create_table`): for Table and SQL jobs.
        """
        return graph.create_table(self.settings, env, t_env)

    def output_type(self) -> Any:
        """The Flink type of the source's rows (:func:`~flink_adapter.rows.output_fields`).

        :data:`~flink_adapter.rows.OUTPUT_FIELDS`, then any fields declared
        with :meth:`FlinkTidemarkReaderBuilder.with_json_fields` and ``malformed``.
        """
        return graph.source_type(self.settings)

    def late_events(self) -> Any:
        """The late side output for this source's rows (an ``OutputTag`` of their type).

        Give it to :class:`~flink_adapter.EventTimeOrderingFunction` (``late=``)
        and ``get_side_output``; for text events it is ``LATE_EVENTS``.
        """
        from flink_adapter.ordering import late_events

        return late_events(self.settings.spec.deserializer, self.settings.json_fields)

    def __repr__(self) -> str:
        return f"FlinkTidemarkReader(streams={self.settings.spec.stream_names!r})"


class FlinkTidemarkReaderBuilder:
    """Collects a source's options; :meth:`build` checks them and returns the reader."""

    def __init__(self) -> None:
        self._uri: str | None = None
        self._credentials: ClientCredentials | None = None
        self._default_scope: str | None = None
        self._streams: list[tuple[str, Any, Any]] = []
        self._options: dict[str, Any] = {}

    def with_store(
        self,
        uri: str,
        default_scope: str | None = None,
        credentials: ClientCredentials | None = None,
    ) -> FlinkTidemarkReaderBuilder:
        """The store: its URI (``tidemark://host:port``), and more.

        ``default_scope`` qualifies stream names given without one;
        ``credentials`` names TLS and token files (or put them in the URI's query).
        """
        self._uri, self._default_scope, self._credentials = uri, default_scope, credentials
        return self

    def for_stream(
        self,
        name: str,
        start: StreamCut | str | Mapping[str, int] = "earliest",
        end: StreamCut | str | Mapping[str, int] | None = None,
    ) -> FlinkTidemarkReaderBuilder:
        """Reads stream ``name`` (``scope/stream``, or ``stream`` in the default scope).

        From ``start`` (earliest, latest or a cut) and, for a bounded read, up to ``end``.
        """
        self._streams.append((name, start, end))
        return self

    def with_deserialization_schema(self, name: str) -> FlinkTidemarkReaderBuilder:
        """``bytes`` (the default), ``string`` or ``json``.

        ``string`` and ``json`` events reach Flink as their text. A JSON event
        is parsed only for a timestamp assigner: with event time from
        ingestion it passes through unparsed.
        """
        return self._set("deserialization_schema", name)

    def with_json_fields(self, fields: Any) -> FlinkTidemarkReaderBuilder:
        """Typed columns from each JSON event's fields, as Flink's JSON row format gives them.

        ``fields``: field names with their Flink types, a mapping or pairs
        (``{"sensor": Types.STRING(), "value": Types.DOUBLE()}``; types
        ``Types.STRING/BOOLEAN/INT/LONG/FLOAT/DOUBLE()`` or their SQL names).
        The rows keep every column, ``event`` the unparsed text included,
        and carry one column per field after ``rt``, then ``malformed``; the
        JVM extracts them (no Python function parses JSON). An event that
        does not match (not a JSON object, a field missing or null, a value
        that does not convert) is never dropped: ``malformed`` is TRUE and
        the fields that do not match are NULL. Needs the ``json`` schema.
        See :mod:`flink_adapter.json_fields`.
        """
        return self._set("json_fields", fields)

    def with_time_domain(self, domain: TimeDomain | str) -> FlinkTidemarkReaderBuilder:
        """``PROCESSING_TIME`` (the default: no watermarks), ``INGESTION_TIME`` or ``EVENT_TIME``.

        ``EVENT_TIME``: Flink's watermark is the event time the stream's
        writers asserted (seed 002), the least of the writers active at the
        group's position; it needs a timestamp assigner.
        """
        return self._set("time_domain", domain)

    def with_timestamp_assigner(self, assigner: str) -> FlinkTidemarkReaderBuilder:
        """Event time: a JSON field's name, or a ``module:function`` path."""
        return self._set("timestamp_assigner", assigner)

    def with_max_event_time_lag(self, lag: int | timedelta) -> FlinkTidemarkReaderBuilder:
        """How far event time may trail the watermark (ms or a timedelta), default 0.

        In the ingestion-time domain, how far event time may trail ingestion
        time; in the event-time domain, a margin for writers that assert
        optimistically.
        """
        return self._set("max_event_time_lag", lag)

    def with_watermark_percentile(self, p: float) -> FlinkTidemarkReaderBuilder:
        """The fraction of the group's work the watermark waits for, in (0, 1]; default 1.

        1 is the perfect watermark. Below 1 (ingestion- or event-time
        domain) the watermark passes the oldest ``1 - p`` of the work (a
        segment's backlog, a straggling writer): their events come out
        late, flagged and counted (``tidemark.lateEvents``,
        ``tidemark.lateFractionPpm``), never dropped.
        """
        return self._set("watermark_percentile", p)

    def with_reader_group_name(self, name: str) -> FlinkTidemarkReaderBuilder:
        """The name of the source's state and operators."""
        return self._set("reader_group_name", name)

    def uid(self, uid: str) -> FlinkTidemarkReaderBuilder:
        """The uid prefix of the source's operators (keep it to restore from a savepoint)."""
        return self._set("uid", uid)

    def with_event_read_timeout(self, timeout: int | timedelta) -> FlinkTidemarkReaderBuilder:
        """How long one store call may take (ms or a timedelta), default 60 s."""
        return self._set("event_read_timeout", timeout)

    def with_parallelism(self, parallelism: int) -> FlinkTidemarkReaderBuilder:
        """Reader subtasks (default: the environment's parallelism)."""
        return self._set("parallelism", parallelism)

    def with_epoch_interval(self, interval: int | timedelta) -> FlinkTidemarkReaderBuilder:
        """How often the coordinator plans reads (ms or a timedelta), default 50 ms.

        An append waits half of it on average before its epoch plans it, so
        it bounds the watermark's latency from below. An epoch costs the
        store one small call however many segments there are, and after an
        epoch that found nothing new the next waits on the store for a
        change instead (:meth:`with_idle_wait`).
        """
        return self._set("epoch_interval", interval)

    def with_idle_wait(self, wait: int | timedelta) -> FlinkTidemarkReaderBuilder:
        """How long an epoch after an idle one waits for a change (ms or a timedelta).

        Default 250 ms, at most 30 s (the longest the store holds a call), 0:
        never. Such an epoch asks the store once and the store answers at the
        first change (an event, a watermark, a seal) or when the wait ends: so
        an idle job asks the store a few times a second rather than every
        ``with_epoch_interval``, and a change still reaches the job within an
        epoch interval. The wait runs on the coordinator's store thread, never
        on Flink's task thread, so checkpoints and a cancel do not wait for it
        (:mod:`flink_adapter.epoch_plans`). A bounded read never waits.
        """
        return self._set("idle_wait", wait)

    def with_stall_log_after(self, after: int | timedelta) -> FlinkTidemarkReaderBuilder:
        """Logs what holds the watermark once per stall longer than ``after`` (default 1 min).

        A stall: the job's processing-time watermark (the ingestion time of
        its oldest event not planned yet) stands longer than ``after``; the
        coordinator logs the segment, writer or reader holding it
        (``tidemarkctl watermarks --why`` for a job). 0: never.
        """
        return self._set("stall_log_after", after)

    def with_epoch_budget(
        self, max_events: int | None = MAX_EPOCH_EVENTS, max_bytes: int | None = MAX_EPOCH_BYTES
    ) -> FlinkTidemarkReaderBuilder:
        """The most events and bytes one epoch reads (None: no limit)."""
        return self._set("epoch_budget", (max_events, max_bytes))

    def with_read_task_size(
        self, max_events: int | None = MAX_TASK_EVENTS, max_bytes: int | None = MAX_TASK_BYTES
    ) -> FlinkTidemarkReaderBuilder:
        """The most events and bytes one read task holds (None: no limit).

        A reader hands a task's rows to Flink once the task is read: smaller
        tasks give steadier output, larger ones fewer store calls and fewer
        Python calls per event. Defaults: 4,000 events, 1 MiB.
        """
        return self._set("read_task_size", (max_events, max_bytes))

    def with_python_execution_mode(self, mode: str) -> FlinkTidemarkReaderBuilder:
        """Sets where the job's Python runs: ``thread`` (in the TaskManager's JVM) or ``process``.

        PyFlink's ``python.execution-mode`` is the job's, for every Python
        function of it, the user's own included. Without this call the
        source leaves it as the job has it (PyFlink's default: process
        mode). Thread mode reads 1.2 to 1.3 times faster into Java
        operators (without object reuse), but makes a job that calls a
        Python function per row with several subtasks in a TaskManager 2.4
        to 3.2 times slower (see the README). In thread mode the user's
        functions get PyFlink's ``RuntimeContext`` task methods from
        :mod:`flink_adapter.runtime_context` (each starts its ``open`` with
        ``import flink_adapter``). Each of the source's functions logs the
        mode it actually runs in, and says so in the metric
        ``tidemark.pythonThreadMode``: PyFlink falls back to process mode
        silently. See :mod:`flink_adapter.python_mode`.
        """
        return self._set("python_mode", mode)

    def build(self, check_store: bool = True) -> FlinkTidemarkReader:
        """The reader these options describe, checked against its store once.

        With ``check_store`` (the default) the store is asked once, as
        Spark's ``load()`` does (:func:`~connector.reader.source.probe_store`):
        it must answer (an address where nothing listens fails at once, a
        silent one within :data:`~connector.reader.source.PROBE_BOUND_S`
        seconds), its streams must exist and the cuts' segments with them.
        ``check_store=False`` skips that, for a job built where the store
        cannot be reached (its readers must reach it all the same).

        Raises:
            InvalidArgumentError: naming the option whose value is wrong or missing.
            StoreUnavailableError: the store did not answer; names ``with_store`` and the URI.
            NotFoundError: a stream does not exist; names ``for_stream`` and the stream.
        """
        settings = self._settings()
        if check_store:
            probe_store(settings.spec)
        return FlinkTidemarkReader(settings)

    def _set(self, option: str, value: Any) -> FlinkTidemarkReaderBuilder:
        self._options[option] = value
        return self

    def _settings(self) -> SourceSettings:
        options = self._options
        timestamp = options.get("timestamp_assigner")
        if timestamp is not None and (not isinstance(timestamp, str) or not timestamp):
            msg = (
                "with_timestamp_assigner: expected a field name or 'module:function', "
                f"got {timestamp!r}"
            )
            raise InvalidArgumentError(msg)
        is_path = timestamp is not None and ":" in timestamp
        lag = options.get("max_event_time_lag")
        timeout = _millis("with_event_read_timeout", options.get("event_read_timeout", 60_000))
        spec = ReadSpec.build(
            names=FLINK_NAMES,
            uri=self._uri,
            credentials=self._credentials,
            streams=self._stream_reads(),
            deserializer=options.get("deserialization_schema", "bytes"),
            time_domain=options.get("time_domain", TimeDomain.PROCESSING_TIME),
            max_event_time_lag_ms=None if lag is None else _millis("with_max_event_time_lag", lag),
            watermark_percentile=options.get("watermark_percentile"),
            timestamp_field=None if is_path else timestamp,
            timestamp_assigner=timestamp if is_path else None,
            budget=options.get("epoch_budget", (MAX_EPOCH_EVENTS, MAX_EPOCH_BYTES)),
            task_size=options.get("read_task_size", (MAX_TASK_EVENTS, MAX_TASK_BYTES)),
            call_timeout_ms=60_000
            if timeout is None
            else _millis("with_event_read_timeout", timeout),
        )
        group = options.get("reader_group_name", "flink-reader")
        _checked("with_reader_group_name", lambda: validate_name("reader group", group))
        parallelism = options.get("parallelism")
        if parallelism is not None and (
            isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1
        ):
            msg = f"with_parallelism: expected an integer >= 1, got {parallelism!r}"
            raise InvalidArgumentError(msg)
        interval = _millis("with_epoch_interval", options.get("epoch_interval", EPOCH_INTERVAL_MS))
        if not 1 <= interval <= 60_000:
            msg = f"with_epoch_interval: expected 1 ms to 60 s, got {interval!r} ms"
            raise InvalidArgumentError(msg)
        idle_wait = _millis("with_idle_wait", options.get("idle_wait", IDLE_WAIT_MS))
        if not 0 <= idle_wait <= MAX_WAIT_MS:
            msg = f"with_idle_wait: expected 0 ms to 30 s (0: never wait), got {idle_wait!r} ms"
            raise InvalidArgumentError(msg)
        python_mode = options.get("python_mode")
        if python_mode is not None and (
            not isinstance(python_mode, str) or python_mode.lower() not in MODES
        ):
            msg = f"with_python_execution_mode: expected one of {list(MODES)}, got {python_mode!r}"
            raise InvalidArgumentError(msg)
        return SourceSettings(
            json_fields=self._json_fields(spec.deserializer),
            spec=spec,
            python_mode=None if python_mode is None else python_mode.lower(),
            reader_group=group,
            uid=options.get("uid"),
            parallelism=parallelism,
            epoch_interval_ms=interval,
            idle_wait_ms=idle_wait,
            stall_log_after_ms=_millis(
                "with_stall_log_after",
                options.get("stall_log_after", DEFAULT_STALL_LOG_AFTER_MS),
            ),
        )

    def _json_fields(self, deserializer: str) -> tuple[tuple[str, str], ...]:
        if "json_fields" not in self._options:
            return ()
        fields = self._options["json_fields"]
        if deserializer != "json":
            msg = (
                f"{JSON_FIELDS_OPTION}: declared fields {fields!r} need "
                f"with_deserialization_schema('json'), got {deserializer!r}"
            )
            raise InvalidArgumentError(msg)
        return declared_fields(fields, OUTPUT_FIELDS)

    def _stream_reads(self) -> list[StreamRead]:
        reads = []
        for name, start, end in self._streams:
            qualified = (
                name
                if not isinstance(name, str) or "/" in name or self._default_scope is None
                else f"{self._default_scope}/{name}"
            )
            reads.append(
                StreamRead(
                    qualified,
                    FLINK_NAMES.checked("start", lambda s=start: StreamCut.of(s)),
                    None
                    if end is None
                    else FLINK_NAMES.checked("end", lambda e=end: StreamCut.of(e)),
                )
            )
        return reads


def _checked(option: str, check: Any) -> Any:
    try:
        return check()
    except InvalidArgumentError as error:
        msg = f"{option}: {error}"
        raise InvalidArgumentError(msg) from None


def _millis(option: str, value: Any) -> int:
    """``value`` in ms; refused naming ``option`` once (:func:`to_millis` names it itself)."""
    return to_millis(option, value)
