"""What is read: one :class:`ReadSpec` for every host of the reader core.

Pravega's ``AbstractReaderBuilder`` in one frozen value: the streams with
their start and end cuts, the store and its credentials, the time keeping
(time domain, lag, timestamp assigner), the deserializer, the budget of a
batch and the size of a read task. Each engine adapter maps its own options
to :meth:`ReadSpec.build` and to nothing else; the checks are made here,
once, and their errors name the engine's option, because the adapter hands
its option names over (:class:`OptionNames`): Spark's read ``option
'maxEventTimeLag' ...``, Flink's ``with_max_event_time_lag: ...``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from connector.client.connection import StoreClient, parse_uri
from connector.client.serializers import SERIALIZER_NAMES
from connector.errors import InvalidArgumentError
from connector.groups.percentile import PERFECT, check_percentile
from connector.names import StreamId
from connector.reader.events import TimeDomain
from connector.reader.source.cuts import StreamCut
from connector.reader.source.limits import Budget
from connector.reader.source.timekeeping import TimeKeeping
from connector.security.credentials import ClientCredentials, split_uri
from connector.timestamps import (
    FieldTimestampAssigner,
    TimestampAssigner,
    assigner_from_path,
)

__all__ = ["OptionNames", "ReadSpec", "StreamRead", "store_uri"]

T = TypeVar("T")


@dataclass(frozen=True)
class OptionNames:
    """How an engine names the options a :class:`ReadSpec` is made of, for its messages.

    ``labels`` maps a spec field (``store``, ``streams``, ``start``, ``end``,
    ``time_domain``, ``max_event_time_lag``, ``timestamp_field``,
    ``timestamp_assigner``, ``deserializer``, ``budget.max_events``,
    ``budget.max_bytes``, ``task_size``, ``call_timeout``) to the engine's
    words for it; a field without its own label takes the label of the part
    before its dot. ``given`` maps a field to the value as the user wrote
    it (Spark's option strings), shown instead of the parsed value.
    """

    labels: tuple[tuple[str, str], ...] = ()
    given: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, labels: Mapping[str, str], given: Mapping[str, str] | None = None) -> OptionNames:
        """Names from mappings (kept as sorted pairs: the value stays hashable)."""
        return cls(tuple(sorted(labels.items())), tuple(sorted((given or {}).items())))

    def label(self, name: str) -> str:
        """The engine's words for spec field ``name``."""
        labels = dict(self.labels)
        return labels.get(name) or labels.get(name.partition(".")[0]) or name

    def shown(self, name: str, value: object) -> str:
        """``value`` of field ``name`` as the user gave it, quoted."""
        given = dict(self.given)
        return repr(given[name]) if name in given else repr(value)

    def refuse(self, name: str, problem: str) -> NoReturn:
        """Raises InvalidArgumentError about field ``name``: its label, then ``problem``."""
        msg = f"{self.label(name)}: {problem}"
        raise InvalidArgumentError(msg)

    def checked(self, name: str, check: Callable[[], T]) -> T:
        """``check()``, its InvalidArgumentError led by field ``name``'s label."""
        try:
            return check()
        except InvalidArgumentError as error:
            self.refuse(name, str(error))


@dataclass(frozen=True)
class StreamRead:
    """One stream read: its name, where reading starts and, for a bounded read, where it ends."""

    stream: str
    start: StreamCut = field(default_factory=StreamCut.earliest)
    end: StreamCut | None = None


@dataclass(frozen=True)
class ReadSpec:
    """Everything a read needs at run time, plain and picklable: see the module docstring.

    Build it with :meth:`build`, which checks every part.

    Attributes:
        store: the store's URI without its query (``tidemark://host:port``).
        credentials: the TLS and token files the store is reached with.
        streams: the streams read, in the order given, with their cuts.
        time: the time keeping (domain, lag, timestamp assigner).
        deserializer: ``bytes``, ``string`` or ``json``.
        budget: the most one batch (a Spark micro-batch, a Flink epoch) reads.
        task_size: the most one read task holds (unlimited: a task is a
            whole lineage chain).
        call_timeout_ms: how long one store call may take before it is
            retried (None: the client's default).
        names: the engine's names of the options, for later errors.
    """

    store: str
    credentials: ClientCredentials
    streams: tuple[StreamRead, ...]
    time: TimeKeeping
    deserializer: str
    budget: Budget = field(default_factory=Budget)
    task_size: Budget = field(default_factory=Budget)
    call_timeout_ms: int | None = None
    names: OptionNames = field(default_factory=OptionNames, compare=False)

    @classmethod
    def build(
        cls,
        *,
        names: OptionNames,
        uri: str | None,
        streams: Iterable[StreamRead],
        deserializer: str,
        credentials: ClientCredentials | None = None,
        time_domain: TimeDomain | str = TimeDomain.PROCESSING_TIME,
        max_event_time_lag_ms: int | None = None,
        watermark_percentile: float | None = None,
        timestamp_field: str | None = None,
        timestamp_assigner: str | None = None,
        budget: tuple[int | None, int | None] = (None, None),
        task_size: tuple[int | None, int | None] = (None, None),
        call_timeout_ms: int | None = None,
    ) -> ReadSpec:
        """A checked spec; each error names the engine's option (``names``) and its value.

        ``timestamp_field`` names a JSON field holding event time;
        ``timestamp_assigner`` a ``module:function`` giving it; neither: the
        ingestion time (not in the event-time domain, which needs one).
        ``max_event_time_lag_ms`` and ``watermark_percentile`` (in (0, 1],
        default 1: the perfect watermark) are for the domains with watermarks.

        Raises:
            InvalidArgumentError: naming the option whose value is wrong or missing.
        """
        base, found = store_uri(uri, credentials, names)
        reads = _checked_streams(tuple(streams), names)
        if deserializer not in SERIALIZER_NAMES:
            expected = list(SERIALIZER_NAMES)
            shown = names.shown("deserializer", deserializer)
            names.refuse("deserializer", f"expected one of {expected}, got {shown}")
        domain = names.checked("time_domain", lambda: TimeDomain.parse(time_domain))
        if max_event_time_lag_ms is not None and domain is TimeDomain.PROCESSING_TIME:
            shown = names.shown("max_event_time_lag", max_event_time_lag_ms)
            msg = (
                f"{names.label('max_event_time_lag')} ({shown}) needs "
                f"{names.label('time_domain')} {TimeDomain.INGESTION_TIME.value!r} or "
                f"{TimeDomain.EVENT_TIME.value!r}: the {domain.value!r} domain has no watermarks"
            )
            raise InvalidArgumentError(msg)
        assigner = _assigner(timestamp_field, timestamp_assigner, deserializer, names)
        if domain is TimeDomain.EVENT_TIME and assigner is None:
            msg = (
                f"{names.label('time_domain')} {TimeDomain.EVENT_TIME.value!r} compares each "
                "event's own time with what its writer asserted: give "
                f"{names.label('timestamp_field')} or {names.label('timestamp_assigner')}"
            )
            raise InvalidArgumentError(msg)
        percentile = _percentile(watermark_percentile, domain, names)
        time = names.checked(
            "max_event_time_lag",
            lambda: TimeKeeping.of(domain, assigner, max_event_time_lag_ms, percentile),
        )
        limits = {}
        for part, (events, size) in (("budget", budget), ("task_size", task_size)):
            names.checked(f"{part}.max_events", lambda e=events: Budget(max_events=e))
            names.checked(f"{part}.max_bytes", lambda s=size: Budget(max_bytes=s))
            limits[part] = Budget(events, size)
        if call_timeout_ms is not None and call_timeout_ms < 1:
            shown = names.shown("call_timeout", call_timeout_ms)
            names.refuse("call_timeout", f"expected at least 1 ms, got {shown} ms")
        return cls(
            store=base,
            credentials=found,
            streams=reads,
            time=time,
            deserializer=deserializer,
            budget=limits["budget"],
            task_size=limits["task_size"],
            call_timeout_ms=call_timeout_ms,
            names=names,
        )

    @property
    def uri(self) -> str:
        """The store's URI with the credential files in its query (files only: safe to log)."""
        query = self.credentials.to_query()
        return f"{self.store}?{query}" if query else self.store

    @property
    def stream_names(self) -> list[str]:
        """The streams' names, in the order given."""
        return [read.stream for read in self.streams]

    @property
    def bounded(self) -> bool:
        """Whether every stream has an end: the read then finishes."""
        return all(read.end is not None for read in self.streams)

    @property
    def start(self) -> StreamCut:
        """Where the read starts: the streams' one start word, or their cuts as one cut."""
        return _joined(read.start for read in self.streams)

    @property
    def end(self) -> StreamCut | None:
        """Where a bounded read ends (the streams' one end word, or their cuts), else None."""
        if not self.bounded:
            return None
        return _joined(read.end for read in self.streams if read.end is not None)

    def client(self) -> StoreClient:
        """A new client of the store (the caller closes it)."""
        if self.call_timeout_ms is None:
            return StoreClient(self.uri)
        timeout_s = self.call_timeout_ms / 1000
        return StoreClient(self.uri, retry_timeout_s=timeout_s, call_timeout_s=timeout_s)


def store_uri(
    uri: str | None, credentials: ClientCredentials | None, names: OptionNames
) -> tuple[str, ClientCredentials]:
    """The store URI without its query, and its query's credentials merged with ``credentials``.

    Raises:
        InvalidArgumentError: no URI, or a malformed one, naming the store's option.
    """
    if not uri:
        names.refuse("store", "the store's uri is required, such as 'tidemark://host:port'")
    names.checked("store", lambda: parse_uri(uri))
    base, in_uri = names.checked("store", lambda: split_uri(uri))
    return base, in_uri.merged(credentials) if credentials else in_uri


def _checked_streams(reads: tuple[StreamRead, ...], names: OptionNames) -> tuple[StreamRead, ...]:
    if not reads:
        names.refuse("streams", "at least one stream is required")
    checked = tuple(StreamRead(_stream_name(read, names), read.start, read.end) for read in reads)
    seen: set[str] = set()
    for read in checked:
        if read.stream in seen:
            shown = names.shown("streams", [r.stream for r in checked])
            names.refuse("streams", f"stream {read.stream!r} is named twice in {shown}")
        seen.add(read.stream)
    starts = {read.start for read in checked}
    if len(starts) > 1 and any(read.start.kind != "offsets" for read in checked):
        msg = "streams read together share one start (earliest, latest), or each gives a cut"
        names.refuse("start", msg)
    if len({read.end is not None for read in checked}) > 1:
        msg = "give every stream an end for a bounded read, or none for an unbounded one"
        names.refuse("end", msg)
    ends = {read.end for read in checked if read.end is not None}
    if len(ends) > 1 and any(end.kind != "offsets" for end in ends):
        msg = "streams read together share one end (latest), or each gives a cut"
        names.refuse("end", msg)
    if any(end.kind == "earliest" for end in ends):
        names.refuse("end", "a read cannot end at 'earliest': give 'latest' or a cut")
    return checked


def _stream_name(read: StreamRead, names: OptionNames) -> str:
    return str(names.checked("streams", lambda: StreamId.parse(read.stream)))


def _assigner(
    field_name: str | None, path: str | None, deserializer: str, names: OptionNames
) -> TimestampAssigner[Any] | None:
    """The assigner of a JSON field or a ``module:function``; None for the ingestion time."""
    if field_name is not None and path is not None:
        msg = (
            f"{names.label('timestamp_field')} ({names.shown('timestamp_field', field_name)}) and "
            f"{names.label('timestamp_assigner')} ({names.shown('timestamp_assigner', path)}) "
            "exclude each other: give one"
        )
        raise InvalidArgumentError(msg)
    if path is not None:
        return names.checked("timestamp_assigner", lambda: assigner_from_path(path))
    if field_name is None:
        return None
    shown = names.shown("timestamp_field", field_name)
    if not field_name.strip():
        names.refuse("timestamp_field", f"expected a field name, got {shown}")
    if deserializer != "json":
        msg = (
            f"{names.label('timestamp_field')} ({shown}) reads a field of JSON events: "
            f"it needs {names.label('deserializer')} 'json', not {deserializer!r}"
        )
        raise InvalidArgumentError(msg)
    return FieldTimestampAssigner(field_name)


def _joined(cuts: Iterable[StreamCut]) -> StreamCut:
    """The streams' cuts as one: their shared word, or the union of their offsets."""
    cuts = list(cuts)
    if all(cut.kind != "offsets" for cut in cuts):
        return cuts[0]
    joined: dict[str, int] = {}
    for cut in cuts:
        joined.update(cut.as_dict())
    return StreamCut.offsets(joined)


def _percentile(p: float | None, domain: TimeDomain, names: OptionNames) -> float:
    """The checked watermark percentile (None: 1), refused naming the option and its value."""
    if p is None:
        return PERFECT
    shown = names.shown("watermark_percentile", p)
    if domain is TimeDomain.PROCESSING_TIME:
        names.refuse(
            "watermark_percentile",
            f"{shown} needs {names.label('time_domain')} {TimeDomain.INGESTION_TIME.value!r} or "
            f"{TimeDomain.EVENT_TIME.value!r}: the {domain.value!r} domain has no watermarks",
        )
    return names.checked("watermark_percentile", lambda: check_percentile(p, "the percentile"))
