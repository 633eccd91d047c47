"""The options of the ``tidemark`` format, parsed and checked before a query starts.

Spark hands a data source its options as a case-insensitive dict of strings;
:meth:`TidemarkOptions.parse` (reading) and :meth:`SinkOptions.parse`
(writing) turn it into a frozen value, or raise :class:`InvalidArgumentError`
naming the option (in Spark's camelCase) and the bad value. Nothing here
touches the JVM or the store, so the parsed values pickle to Spark's workers.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from connector.client.connection import parse_uri
from connector.client.serializers import SERIALIZER_NAMES
from connector.errors import InvalidArgumentError, TidemarkError
from connector.names import SegmentId, StreamId
from connector.reader.events import ReaderConfig, TimeDomain
from connector.reader.planning import StartPosition
from connector.reader.timestamps import (
    FieldTimestampAssigner,
    IngestionTimeAssigner,
    TimestampAssigner,
    assigner_from_path,
)
from connector.security.credentials import ClientCredentials, split_uri

__all__ = [
    "DESERIALIZERS",
    "SinkOptions",
    "StreamCut",
    "parse_stream_cut",
    "TidemarkOptions",
    "parse_interval_ms",
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
    "timestampField",
    "timestampAssigner",
    "startingStreamCut",
    "endingStreamCut",
    "maxEventsPerTrigger",
    "maxBytesPerTrigger",
    "deserializer",
)
_SINK_OPTIONS = ("uri", "stream", "routingKeyColumn", "eventColumn", "writeId")

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


#: Where a read starts or a bounded read ends: the reader core's one vocabulary.
StreamCut = StartPosition


def parse_stream_cut(text: str, option: str, streams: tuple[StreamId, ...]) -> StartPosition:
    """Parses ``earliest``, ``latest`` or a cut's JSON over segments of ``streams``.

    Raises:
        InvalidArgumentError: naming ``option`` and the bad value: malformed
            JSON, a bad segment name, a segment of a stream not read, a
            stream with no segment in the cut, or an offset that is not an
            integer >= 0.
    """
    word = text.strip().lower() if isinstance(text, str) else ""
    if word == "earliest":
        return StartPosition.earliest()
    if word == "latest":
        return StartPosition.latest()
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
    return StartPosition.offsets(offsets)


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
    """The options by camelCase name; raises on a name that is neither known nor Spark's."""
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
            close = difflib.get_close_matches(lower, list(by_lower), n=1)
            hint = f"did you mean {by_lower[close[0]]!r}? " if close else ""
            msg = (
                f"unknown option {key!r} (Spark passes option names in lower case): "
                f"{hint}the tidemark format takes {sorted(known)!r}"
            )
            raise InvalidArgumentError(msg)
    return found


def _uri(found: dict[str, str]) -> str:
    """The store URI, with the credential options folded into its query.

    The files must be readable where tasks run: on every executor, not only the driver.
    """
    uri = found.get("uri")
    if not uri:
        msg = "option 'uri' is required: the store's address, such as 'tidemark://host:port'"
        raise InvalidArgumentError(msg)
    try:
        parse_uri(uri)
        base, in_uri = split_uri(uri)
    except InvalidArgumentError as error:
        msg = f"option 'uri': {error}"
        raise InvalidArgumentError(msg) from None
    given = {
        field: found[option] for option, field in _CREDENTIAL_OPTIONS.items() if found.get(option)
    }
    credentials = in_uri.merged(ClientCredentials(**given))
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
        if stream in streams:
            msg = f"option 'stream' names {str(stream)!r} twice: {text!r}"
            raise InvalidArgumentError(msg)
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


def _choice(found: dict[str, str], option: str, choices: tuple[str, ...], default: str) -> str:
    text = found.get(option, default)
    value = text.strip().lower()
    if value not in choices:
        msg = f"option {option!r} must be one of {list(choices)!r}, got {text!r}"
        raise InvalidArgumentError(msg)
    return value


# --- the source ---------------------------------------------------------------


@dataclass(frozen=True)
class TidemarkOptions:
    """The checked options of a ``tidemark`` read, batch or streaming.

    Attributes:
        uri: the store, ``tidemark://host:port``, with the credential options
            (``tlsCaFile``, ``tlsCertFile``, ``tlsKeyFile``, ``tokenFile``) in its query.
        streams: the streams read, in the order given.
        time_domain: PROCESSING_TIME (no watermark rows, ``watermark`` null)
            or INGESTION_TIME.
        max_event_time_lag_ms: subtracted from the group watermark.
        timestamp_field: the JSON field holding each event's time, or None.
        timestamp_assigner: ``module:function`` giving each event's time, or None.
        starting_stream_cut: where reading starts (default ``earliest``).
        ending_stream_cut: where a batch read ends (default ``latest``);
            None for streaming reads.
        max_events_per_trigger / max_bytes_per_trigger: limits of one
            micro-batch, None for no limit.
        deserializer: ``bytes``, ``string`` or ``json``.
    """

    uri: str
    streams: tuple[StreamId, ...]
    time_domain: TimeDomain = TimeDomain.PROCESSING_TIME
    max_event_time_lag_ms: int = 0
    timestamp_field: str | None = None
    timestamp_assigner: str | None = None
    starting_stream_cut: StreamCut = field(default_factory=StartPosition.earliest)
    ending_stream_cut: StreamCut | None = None
    max_events_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    deserializer: str = "string"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> TidemarkOptions:
        """Checks every option that does not depend on batch or streaming.

        Call :meth:`for_batch` or :meth:`for_stream` on the result for the rest.

        Raises:
            InvalidArgumentError: naming the option and its bad value.
        """
        found = _lookup(options, _SOURCE_OPTIONS)
        streams = _streams(found)
        try:
            domain = TimeDomain.parse(found.get("timeDomain", TimeDomain.PROCESSING_TIME.value))
        except InvalidArgumentError as error:
            msg = f"option 'timeDomain': {error}"
            raise InvalidArgumentError(msg) from None
        lag_text = found.get("maxEventTimeLag")
        lag = 0 if lag_text is None else parse_interval_ms(lag_text, "maxEventTimeLag")
        if lag_text is not None and domain is not TimeDomain.INGESTION_TIME:
            msg = (
                f"option 'maxEventTimeLag' ({lag_text!r}) needs timeDomain 'IngestionTime': "
                "the processing-time domain has no watermarks"
            )
            raise InvalidArgumentError(msg)
        deserializer = _choice(found, "deserializer", DESERIALIZERS, "string")
        field_name, assigner = _timestamps(found, deserializer)
        ending = found.get("endingStreamCut")
        return cls(
            uri=_uri(found),
            streams=streams,
            time_domain=domain,
            max_event_time_lag_ms=lag,
            timestamp_field=field_name,
            timestamp_assigner=assigner,
            starting_stream_cut=parse_stream_cut(
                found.get("startingStreamCut", "earliest"), "startingStreamCut", streams
            ),
            ending_stream_cut=None
            if ending is None
            else parse_stream_cut(ending, "endingStreamCut", streams),
            max_events_per_trigger=_positive_int(found, "maxEventsPerTrigger"),
            max_bytes_per_trigger=_positive_int(found, "maxBytesPerTrigger"),
            deserializer=deserializer,
        )

    def for_batch(self) -> TidemarkOptions:
        """These options for a bounded read: the ending cut defaults to ``latest``.

        Raises:
            InvalidArgumentError: when a per-trigger limit is set (batch reads have no triggers).
        """
        for option, value in (
            ("maxEventsPerTrigger", self.max_events_per_trigger),
            ("maxBytesPerTrigger", self.max_bytes_per_trigger),
        ):
            if value is not None:
                msg = f"option {option!r} ({value!r}) applies to streaming reads only"
                raise InvalidArgumentError(msg)
        if self.ending_stream_cut is not None:
            return self
        return replace(self, ending_stream_cut=StartPosition.latest())

    def for_stream(self) -> TidemarkOptions:
        """These options for a streaming read.

        Raises:
            InvalidArgumentError: when ``endingStreamCut`` is set (it bounds batch reads only).
        """
        if self.ending_stream_cut is not None:
            msg = (
                f"option 'endingStreamCut' ({self.ending_stream_cut.to_json()!r}) applies to "
                "batch reads only: use spark.read, not spark.readStream"
            )
            raise InvalidArgumentError(msg)
        return self

    def assigner(self) -> TimestampAssigner[Any]:
        """The timestamp assigner these options name: field, function, or ingestion time."""
        if self.timestamp_field is not None:
            return FieldTimestampAssigner(self.timestamp_field)
        if self.timestamp_assigner is not None:
            return assigner_from_path(self.timestamp_assigner)
        return IngestionTimeAssigner()

    def reader_config(self) -> ReaderConfig:
        """The reader core's configuration for these options."""
        return ReaderConfig(
            time_domain=self.time_domain,
            timestamp_assigner=self.assigner(),
            max_event_time_lag=self.max_event_time_lag_ms,
        )


def _timestamps(found: dict[str, str], deserializer: str) -> tuple[str | None, str | None]:
    field_name = found.get("timestampField")
    assigner = found.get("timestampAssigner")
    if field_name is not None and assigner is not None:
        msg = (
            f"options 'timestampField' ({field_name!r}) and 'timestampAssigner' ({assigner!r}) "
            "exclude each other: give one"
        )
        raise InvalidArgumentError(msg)
    if field_name is not None:
        if not field_name.strip():
            msg = f"option 'timestampField' must name a field, got {field_name!r}"
            raise InvalidArgumentError(msg)
        if deserializer != "json":
            msg = (
                f"option 'timestampField' ({field_name!r}) reads a field of JSON events: "
                f"set deserializer 'json' (it is {deserializer!r})"
            )
            raise InvalidArgumentError(msg)
    if assigner is not None:
        try:
            assigner_from_path(assigner)
        except TidemarkError as error:
            msg = f"option 'timestampAssigner': {error}"
            raise InvalidArgumentError(msg) from None
    return field_name, assigner


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
    """

    uri: str
    stream: StreamId
    routing_key_column: str = "routing_key"
    event_column: str = "event"
    write_id: str | None = None

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
        return cls(
            uri=_uri(found),
            stream=streams[0],
            routing_key_column=columns["routingKeyColumn"],
            event_column=columns["eventColumn"],
            write_id=write_id,
        )
