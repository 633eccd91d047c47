"""The options of the ``tidemark`` format, checked before a query starts.

Spark hands a data source its options as a case-insensitive dict of strings.
:func:`read_spec` parses a read's strings (intervals, JSON cuts, numbers,
comma-separated streams) and maps them to the reader core's one read
specification, :class:`~connector.reader.source.ReadSpec`, which checks them
and names Spark's options in its errors (:data:`SOURCE_NAMES`);
:func:`for_batch` and :func:`for_stream` add what depends on the kind of
read. :meth:`SinkOptions.parse` checks a write's options. Every error is an
:class:`InvalidArgumentError` naming the option (in Spark's camelCase) and
the bad value. Nothing here touches the JVM or the store, so the parsed
values pickle to Spark's workers.
"""

from __future__ import annotations

import datetime
import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from connector.client.serializers import SERIALIZER_NAMES
from connector.errors import InvalidArgumentError
from connector.names import SegmentId, StreamId, validate_name
from connector.reader.progress_watch import DEFAULT_STALL_LOG_AFTER_MS
from connector.reader.source import OptionNames, ReadSpec, StreamCut, StreamRead
from connector.reader.source.spec import store_uri
from connector.security.credentials import ClientCredentials
from spark_adapter.kafka_options import kafka_answer

__all__ = [
    "DESERIALIZERS",
    "SOURCE_NAMES",
    "SinkOptions",
    "for_batch",
    "for_stream",
    "idle_wait_ms",
    "idle_watermark_step_ms",
    "min_partitions",
    "parse_interval_ms",
    "parse_stream_cut",
    "parse_timestamp_ms",
    "read_spec",
    "reader_group",
    "stall_log_after_ms",
]

#: The values the ``deserializer`` option takes: the client's serializer names.
DESERIALIZERS = SERIALIZER_NAMES

#: Options Spark itself adds to a data source's options; never an error.
_SPARK_OPTIONS = frozenset({"checkpointlocation"})

_SOURCE_OPTIONS = (
    "uri",
    "stream",
    "timeDomain",
    "maxEventTimeLag",
    "watermarkPercentile",
    "timestampField",
    "timestampAssigner",
    "startingStreamCut",
    "endingStreamCut",
    "startingTimestamp",
    "endingTimestamp",
    "maxEventsPerTrigger",
    "maxBytesPerTrigger",
    "deserializer",
    "readerGroup",
    "stallLogAfter",
    "minPartitions",
    "idleWait",
    "idleWatermarkStep",
)
_SINK_OPTIONS = ("uri", "stream", "routingKeyColumn", "eventColumn", "writeId", "assertWatermark")

#: Options naming credential files (never a secret itself: Spark logs and shows options),
#: and the :class:`ClientCredentials` field each sets. Every read and write takes them.
_CREDENTIAL_OPTIONS = {
    "tlsCaFile": "tls_ca_file",
    "tlsCertFile": "tls_cert_file",
    "tlsKeyFile": "tls_key_file",
    "tokenFile": "token_file",
}
_SOURCE_OPTIONS += tuple(_CREDENTIAL_OPTIONS)
_SINK_OPTIONS += tuple(_CREDENTIAL_OPTIONS)

# --- intervals ----------------------------------------------------------------

_UNIT_MS = {
    "week": 7 * 86_400_000,
    "day": 86_400_000,
    "hour": 3_600_000,
    "minute": 60_000,
    "second": 1_000,
    "millisecond": 1,
    "microsecond": 0.001,
}
_TERM = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*")


def parse_interval_ms(text: str, option: str = "interval") -> int:
    """Milliseconds of a Spark interval string such as ``5 seconds`` or ``1 minute 30 seconds``.

    Takes what ``withWatermark`` takes for fixed lengths: an optional leading
    ``interval``, then one or more ``<number> <unit>`` terms with units from
    week down to microsecond (singular or plural). Months and years have no
    fixed length and are refused, as are negative and sub-millisecond results.

    Raises:
        InvalidArgumentError: naming ``option`` and ``text``.
    """
    if not isinstance(text, str):
        msg = f"option {option!r} must be an interval string such as '5 seconds', got {text!r}"
        raise InvalidArgumentError(msg)
    body = text.strip().lower().removeprefix("interval").strip()
    total = 0.0
    position = 0
    while position < len(body):
        match = _TERM.match(body, position)
        unit = match.group(2).removesuffix("s") if match else ""
        if match is None or unit not in _UNIT_MS:
            break
        total += float(match.group(1)) * _UNIT_MS[unit]
        position = match.end()
    if not body or position < len(body):
        msg = (
            f"option {option!r} has invalid interval {text!r}: expected '<number> <unit>' terms "
            "such as '5 seconds', '500 milliseconds' or '1 minute' (units week to microsecond)"
        )
        raise InvalidArgumentError(msg)
    if total != int(total):
        msg = (
            f"option {option!r} has interval {text!r}, which is not a whole number of milliseconds"
        )
        raise InvalidArgumentError(msg)
    return int(total)


# --- stream cuts --------------------------------------------------------------


def parse_timestamp_ms(text: str, option: str) -> int:
    """Epoch milliseconds of ``text``: a whole number of them, or an ISO 8601 time with a zone.

    ``1763158400123``, ``2025-11-14T22:13:20.123Z``, ``2025-11-14 23:13:20+01:00``.

    Raises:
        InvalidArgumentError: naming ``option`` and ``text``: neither form, no zone, or
            before 1970.
    """
    stripped = text.strip() if isinstance(text, str) else ""
    if stripped.isdigit():
        return int(stripped)
    try:
        moment = datetime.datetime.fromisoformat(stripped)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        msg = (
            f"option {option!r} is {text!r}: expected epoch milliseconds such as "
            "'1763158400123' or an ISO 8601 time with its zone such as "
            "'2025-11-14T22:13:20.123Z'"
        )
        raise InvalidArgumentError(msg)
    millis = round(moment.timestamp() * 1000)
    if millis < 0:
        msg = f"option {option!r} is {text!r}, which is before 1970"
        raise InvalidArgumentError(msg)
    return millis


def parse_stream_cut(text: str, option: str, streams: tuple[StreamId, ...]) -> StreamCut:
    """Parses ``earliest``, ``latest`` or a cut's JSON over segments of ``streams``.

    Raises:
        InvalidArgumentError: naming ``option`` and the bad value: malformed
            JSON, a bad segment name, a segment of a stream not read, a
            stream with no segment in the cut, or an offset that is not an
            integer >= 0.
    """
    word = text.strip().lower() if isinstance(text, str) else ""
    if word == "earliest":
        return StreamCut.earliest()
    if word == "latest":
        return StreamCut.latest()
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict) or not value:
        msg = (
            f"option {option!r} is {text!r}: expected 'earliest', 'latest' or a JSON object "
            "mapping segments to byte offsets, such as '{\"scope/stream/0\": 1024}'"
        )
        raise InvalidArgumentError(msg)
    offsets = dict(_cut_entry(option, name, offset, streams) for name, offset in value.items())
    named = {SegmentId.parse(name).stream_id for name in offsets}
    for stream in streams:
        if stream not in named:
            msg = f"option {option!r} names no segment of stream {str(stream)!r}: {text!r}"
            raise InvalidArgumentError(msg)
    return StreamCut.offsets(offsets)


def _cut_entry(
    option: str, name: Any, offset: Any, streams: tuple[StreamId, ...]
) -> tuple[str, int]:
    try:
        segment = SegmentId.parse(name)
    except InvalidArgumentError as error:
        msg = f"option {option!r}: {error}"
        raise InvalidArgumentError(msg) from None
    if segment.stream_id not in streams:
        msg = (
            f"option {option!r} names segment {name!r}, which is not in the streams read "
            f"{[str(s) for s in streams]!r}"
        )
        raise InvalidArgumentError(msg)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        msg = (
            f"option {option!r} gives segment {name!r} offset {offset!r}: expected an integer >= 0"
        )
        raise InvalidArgumentError(msg)
    return str(segment), offset


# --- shared helpers -----------------------------------------------------------


def _lookup(options: Mapping[str, str], known: tuple[str, ...]) -> dict[str, str]:
    """The options by camelCase name; raises on a name that is neither known nor Spark's.

    A Kafka option's name is answered with the option that does the same here
    (:func:`~spark_adapter.kafka_options.kafka_answer`); any other unknown
    name with the known one it most resembles.
    """
    by_lower = {name.lower(): name for name in known}
    found: dict[str, str] = {}
    for key, value in options.items():
        lower = key.lower()
        if lower in by_lower:
            found[by_lower[lower]] = value
        elif lower == "path":
            msg = (
                f"the tidemark format takes no path (got {value!r}): "
                "use option('stream', 'scope/stream')"
            )
            raise InvalidArgumentError(msg)
        elif lower not in _SPARK_OPTIONS:
            kafka = kafka_answer(lower, sink=known is _SINK_OPTIONS)
            close = difflib.get_close_matches(lower, list(by_lower), n=1)
            hint = f"did you mean {by_lower[close[0]]!r}? " if close else ""
            msg = (
                f"unknown option {key!r} (Spark passes option names in lower case): "
                f"{kafka + '. ' if kafka else hint}The tidemark format takes {sorted(known)!r}"
            )
            raise InvalidArgumentError(msg)
    return found


def _credentials(found: dict[str, str]) -> ClientCredentials:
    """The credential options (files, never secrets: Spark logs and shows options).

    The files must be readable where tasks run: on every executor, not only the driver.
    """
    given = {
        field: found[option] for option, field in _CREDENTIAL_OPTIONS.items() if found.get(option)
    }
    return ClientCredentials(**given)


def _uri(found: dict[str, str]) -> str:
    """The store URI, with the credential options folded into its query."""
    base, credentials = store_uri(found.get("uri"), _credentials(found), SOURCE_NAMES)
    query = credentials.to_query()
    return f"{base}?{query}" if query else base


def _streams(found: dict[str, str]) -> tuple[StreamId, ...]:
    text = found.get("stream")
    if not text or not text.strip():
        msg = "option 'stream' is required: one or more 'scope/stream', comma-separated"
        raise InvalidArgumentError(msg)
    streams: list[StreamId] = []
    for part in text.split(","):
        try:
            stream = StreamId.parse(part.strip())
        except InvalidArgumentError as error:
            msg = f"option 'stream' is {text!r}: {error}"
            raise InvalidArgumentError(msg) from None
        streams.append(stream)
    return tuple(streams)


def _positive_int(found: dict[str, str], option: str) -> int | None:
    text = found.get(option)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) <= 0:
        msg = f"option {option!r} must be a whole number > 0, got {text!r}"
        raise InvalidArgumentError(msg)
    return int(text)


# --- the source ---------------------------------------------------------------

#: How the reader core's read specification names the source's options in errors.
SOURCE_LABELS = {
    "store": "option 'uri'",
    "streams": "option 'stream'",
    "start": "option 'startingStreamCut'",
    "end": "option 'endingStreamCut'",
    "time_domain": "option 'timeDomain'",
    "max_event_time_lag": "option 'maxEventTimeLag'",
    "watermark_percentile": "option 'watermarkPercentile'",
    "timestamp_field": "option 'timestampField'",
    "timestamp_assigner": "option 'timestampAssigner'",
    "deserializer": "option 'deserializer'",
    "budget.max_events": "option 'maxEventsPerTrigger'",
    "budget.max_bytes": "option 'maxBytesPerTrigger'",
}
#: The spec field each option sets, for showing its value as given.
_FIELD_OF_OPTION = {
    label.removeprefix("option '").removesuffix("'"): field
    for field, label in SOURCE_LABELS.items()
}
_FIELD_OF_OPTION.update(startingTimestamp="start", endingTimestamp="end")
#: :data:`SOURCE_LABELS` as the core takes them (for errors that show no value).
SOURCE_NAMES = OptionNames.of(SOURCE_LABELS)


def read_spec(options: Mapping[str, str]) -> ReadSpec:
    """The read specification of a ``tidemark`` read, batch or streaming.

    Checks every option that does not depend on batch or streaming; call
    :func:`for_batch` or :func:`for_stream` on the result for the rest.

    Raises:
        InvalidArgumentError: naming the option and its bad value.
    """
    found = _lookup(options, _SOURCE_OPTIONS)
    labels = dict(SOURCE_LABELS)
    given = {_FIELD_OF_OPTION[o]: text for o, text in found.items() if o in _FIELD_OF_OPTION}
    for field, by_time in (("start", "startingTimestamp"), ("end", "endingTimestamp")):
        if by_time in found:
            labels[field] = f"option {by_time!r}"
            given[field] = found[by_time]
    names = OptionNames.of(labels, given)
    streams = _streams(found)
    lag_text = found.get("maxEventTimeLag")
    start = _cut(found, "startingStreamCut", "startingTimestamp", streams) or StreamCut.earliest()
    end = _cut(found, "endingStreamCut", "endingTimestamp", streams)
    return ReadSpec.build(
        names=names,
        uri=found.get("uri"),
        credentials=_credentials(found),
        streams=[StreamRead(str(stream), start, end) for stream in streams],
        deserializer=found.get("deserializer", "string").strip().lower(),
        time_domain=found.get("timeDomain", "ProcessingTime"),
        max_event_time_lag_ms=None
        if lag_text is None
        else parse_interval_ms(lag_text, "maxEventTimeLag"),
        watermark_percentile=_fraction(found, "watermarkPercentile"),
        timestamp_field=found.get("timestampField"),
        timestamp_assigner=found.get("timestampAssigner"),
        budget=(
            _positive_int(found, "maxEventsPerTrigger"),
            _positive_int(found, "maxBytesPerTrigger"),
        ),
    )


def _fraction(found: Mapping[str, str], option: str) -> float | None:
    """Option ``option`` as a number (None: not given); its range is checked by the spec."""
    text = found.get(option)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        msg = f"option {option!r} must be a number in (0, 1], got {text!r}"
        raise InvalidArgumentError(msg) from None


def _cut(
    found: dict[str, str], by_cut: str, by_time: str, streams: tuple[StreamId, ...]
) -> StreamCut | None:
    """The cut option ``by_cut`` or the time option ``by_time``, None without either."""
    if by_cut in found and by_time in found:
        msg = (
            f"options {by_cut!r} ({found[by_cut]!r}) and {by_time!r} ({found[by_time]!r}) "
            "exclude each other: give one"
        )
        raise InvalidArgumentError(msg)
    if by_time in found:
        return StreamCut.at_time(parse_timestamp_ms(found[by_time], by_time))
    if by_cut in found:
        return parse_stream_cut(found[by_cut], by_cut, streams)
    return None


def reader_group(options: Mapping[str, str]) -> tuple[str, str] | None:
    """``readerGroup`` as ``(scope, group)``: the group in the scope of the first stream read.

    Raises:
        InvalidArgumentError: a name a reader group cannot have, naming the option.
    """
    found = _lookup(options, _SOURCE_OPTIONS)
    name = found.get("readerGroup")
    if name is None:
        return None
    try:
        validate_name("reader group", name)
    except InvalidArgumentError as error:
        msg = f"option 'readerGroup': {error}"
        raise InvalidArgumentError(msg) from None
    return _streams(found)[0].scope, name


def stall_log_after_ms(options: Mapping[str, str]) -> int:
    """``stallLogAfter`` (an interval; default 1 minute, 0: never) in ms.

    The driver logs what holds the query's watermark once per stall: when its
    processing-time watermark has stood longer than this.

    Raises:
        InvalidArgumentError: not an interval, naming the option.
    """
    found = _lookup(options, _SOURCE_OPTIONS)
    text = found.get("stallLogAfter")
    return DEFAULT_STALL_LOG_AFTER_MS if text is None else parse_interval_ms(text, "stallLogAfter")


#: How long a trigger after one that found nothing waits for a change (``idleWait``).
DEFAULT_IDLE_WAIT_MS = 250


def idle_wait_ms(options: Mapping[str, str]) -> int:
    """``idleWait`` (an interval; default 250 ms, at most 30 s, 0: never wait) in ms.

    A trigger that follows one which found nothing new waits on the store
    for a change, at most this long, instead of answering at once: so an
    idle query asks the store a few times a second rather than every 10 ms
    (Spark's polling delay), and a change still ends the wait at once (as
    Kafka's ``fetch.max.wait.ms`` does for a fetch). ``Trigger.AvailableNow``
    never waits.

    Raises:
        InvalidArgumentError: not an interval, or over 30 s, naming the option.
    """
    found = _lookup(options, _SOURCE_OPTIONS)
    text = found.get("idleWait")
    if text is None:
        return DEFAULT_IDLE_WAIT_MS
    wait = parse_interval_ms(text, "idleWait")
    if wait > 30_000:
        msg = f"option 'idleWait' is {text!r}: at most 30 seconds (the longest a call waits)"
        raise InvalidArgumentError(msg)
    return wait


def idle_watermark_step_ms(options: Mapping[str, str]) -> int:
    """``idleWatermarkStep`` (an interval; default 0: any rise) in ms.

    A trigger that finds only watermarks moved (the store's idle ticks: no
    event, no seal, no new segment) makes a micro-batch only when the
    watermark Spark sees rose by at least this much; in the processing-time
    domain, which gives Spark no watermark, never. Data never waits for it
    (:mod:`spark_adapter.batching`).

    Raises:
        InvalidArgumentError: not an interval, naming the option.
    """
    text = _lookup(options, _SOURCE_OPTIONS).get("idleWatermarkStep")
    return 0 if text is None else parse_interval_ms(text, "idleWatermarkStep")


def min_partitions(options: Mapping[str, str]) -> int:
    """``minPartitions``: about how many tasks read a batch (Kafka's option).

    A batch reads each lineage chain of segments in a task of its own, its
    ranges cut into pieces of equal bytes, as many per range as its share of
    the batch's bytes times this (Kafka's rule), none below 1 MiB
    (:func:`~connector.reader.source.tasks.spread`). By default the cores
    this driver may use: a local session's parallelism (on a cluster, give
    the executors' cores).

    Raises:
        InvalidArgumentError: not a whole number > 0, naming the option.
    """
    given = _positive_int(_lookup(options, _SOURCE_OPTIONS), "minPartitions")
    return given if given is not None else len(os.sched_getaffinity(0))


def for_batch(spec: ReadSpec) -> ReadSpec:
    """``spec`` for a bounded read: it ends at ``endingStreamCut``, by default ``latest``.

    Raises:
        InvalidArgumentError: when a per-trigger limit is set (batch reads have no
            triggers), or when the read can only come back empty: it starts at
            ``latest`` (a batch read ends there or before), or at a time not
            before the time it ends at.
    """
    for field, limit in (
        ("budget.max_events", spec.budget.max_events),
        ("budget.max_bytes", spec.budget.max_bytes),
    ):
        if limit is not None:
            shown = spec.names.shown(field, limit)
            msg = f"{spec.names.label(field)} ({shown}) applies to streaming reads only"
            raise InvalidArgumentError(msg)
    if spec.start.is_latest:
        shown = spec.names.shown("start", "latest")
        msg = (
            f"{spec.names.label('start')} ({shown}) on a batch read reads nothing: a batch read "
            "ends at 'latest' or before. Start at 'earliest', a cut or a time, or read with "
            "spark.readStream for what comes next"
        )
        raise InvalidArgumentError(msg)
    start, end = spec.start.time_ms, spec.end.time_ms if spec.end is not None else None
    if start is not None and end is not None and end <= start:
        msg = (
            f"{spec.names.label('start')} ({spec.names.shown('start', start)}) is not before "
            f"{spec.names.label('end')} ({spec.names.shown('end', end)}): the read would be empty"
        )
        raise InvalidArgumentError(msg)
    if spec.bounded:
        return spec
    streams = tuple(replace(read, end=StreamCut.latest()) for read in spec.streams)
    return replace(spec, streams=streams)


def for_stream(spec: ReadSpec) -> ReadSpec:
    """``spec`` for a streaming read.

    Raises:
        InvalidArgumentError: when ``endingStreamCut`` is set (it bounds batch reads only).
    """
    if spec.bounded:
        shown = spec.names.shown("end", spec.end.to_json() if spec.end else None)
        msg = (
            f"{spec.names.label('end')} ({shown}) applies to batch reads only: "
            "use spark.read, not spark.readStream"
        )
        raise InvalidArgumentError(msg)
    return spec


# --- the sink -----------------------------------------------------------------

_WRITE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


@dataclass(frozen=True)
class SinkOptions:
    """The checked options of a ``tidemark`` write, batch or streaming.

    Attributes:
        uri: the store, ``tidemark://host:port``, with the credential options
            (``tlsCaFile``, ``tlsCertFile``, ``tlsKeyFile``, ``tokenFile``) in its query.
        stream: the one stream written.
        routing_key_column: the string column whose value routes each event
            (default ``routing_key``).
        event_column: the string or binary column holding each event
            (default ``event``).
        write_id: for batch writes, names the write so that running the same
            write again appends nothing twice; None for a fresh id per write.
        assert_watermark: for streaming writes, asserts the query's event-time
            watermark on the stream after each committed micro-batch (see
            :mod:`spark_adapter.query_watermark`).
        checkpoint_location: the query's ``checkpointLocation`` option, which
            Spark hands the sink too; where the query's watermarks are read.
    """

    uri: str
    stream: StreamId
    routing_key_column: str = "routing_key"
    event_column: str = "event"
    write_id: str | None = None
    assert_watermark: bool = False
    checkpoint_location: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Checks the options of a write.

        Raises:
            InvalidArgumentError: naming the option and its bad value.
        """
        found = _lookup(options, _SINK_OPTIONS)
        streams = _streams(found)
        if len(streams) != 1:
            msg = f"option 'stream' must name one stream to write, got {found['stream']!r}"
            raise InvalidArgumentError(msg)
        write_id = found.get("writeId")
        if write_id is not None and not _WRITE_ID.fullmatch(write_id):
            msg = (
                f"option 'writeId' is {write_id!r}: use 1 to 100 letters, digits, '_', '.' or '-', "
                "starting with a letter or digit"
            )
            raise InvalidArgumentError(msg)
        columns = {}
        for option, default in (("routingKeyColumn", "routing_key"), ("eventColumn", "event")):
            name = found.get(option, default)
            if not name.strip():
                msg = f"option {option!r} must name a column, got {name!r}"
                raise InvalidArgumentError(msg)
            columns[option] = name
        asserting = found.get("assertWatermark", "false").strip().lower()
        if asserting not in ("true", "false"):
            msg = f"option 'assertWatermark' is {found['assertWatermark']!r}: use true or false"
            raise InvalidArgumentError(msg)
        checkpoint = next(
            (v for k, v in options.items() if k.lower() == "checkpointlocation"), None
        )
        return cls(
            uri=_uri(found),
            stream=streams[0],
            routing_key_column=columns["routingKeyColumn"],
            event_column=columns["eventColumn"],
            write_id=write_id,
            assert_watermark=asserting == "true",
            checkpoint_location=checkpoint,
        )
