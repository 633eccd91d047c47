"""The server's metrics, to Prometheus's conventions (``prometheus-client``).

Each server has its own :class:`~prometheus_client.CollectorRegistry`, so two
servers in one process do not mix their numbers. Counters and histograms are
updated as calls are answered (the servicer, and :class:`CallMetricsInterceptor`
for every call) and as groups commit (the store, through
:class:`~connector.store.StoreObserver`); the gauges of the store's state are
read from the store at scrape time.

Conventions (Prometheus's naming guide; ``tests/ops/metric_rules.py`` checks
every metric the server exposes): base units only, so times are
``_seconds`` and a point in time ``_timestamp_seconds`` since the epoch,
sizes ``_bytes``; counters end in ``_total``; no ``_created`` series.

Names, all prefixed ``tidemark_``:

- ``requests_total`` {service, method, code}: every unary call answered, by
  its gRPC status code; ``refused_requests_total`` {cause}: calls refused
  (``unauthenticated``, ``permission_denied``, ``invalid_argument``, or the
  limit a ``RESOURCE_EXHAUSTED`` met: ``out_of_disk_space``,
  ``event_too_large``, ``parked_reads_limit``...).
- ``appended_events_total``, ``appended_bytes_total`` {stream}: events (and their
  payload bytes) stored; duplicates a writer sent again are not counted.
- ``append_seconds``, ``read_seconds``: latency of AppendEvents and ReadSegment
  (a read at the tail includes the time it waited for data).
- ``commit_group_changes``: how many changes each durable group held.
- ``idle_ticks_total``: idle ticks given to segments.
- ``state_reads_total`` {answer}: GetState calls answered with the value
  (``value``) or ``unchanged`` (the caller holds that revision: a reader
  group's idle sync); ``state_read_bytes_total``: the value bytes they sent.
- ``open_segments``, ``streams``, ``journal_bytes``, ``accepting_writes``.
- ``parked_tail_reads``: reads waiting at a segment's tail for data, a seal or
  a watermark rise (they hold no server thread while they wait);
  ``parked_calls`` {method}: calls parked on the server's loop until
  something changes (``ReadSegment``, and ``ReadSegments`` and
  ``DescribeTails``, each counting once whatever it waits on).
- ``fetch_sessions``, ``fetch_session_segments``,
  ``fetch_session_armed_segments``: ReadSegments' fetch sessions open, the
  segments they follow, and those armed (not waiting for their reader to
  consume data).
- ``stream_tail_watermark_timestamp_seconds`` and
  ``stream_tail_watermark_delay_seconds`` {stream}: the lowest watermark of the
  stream's open segments, and how far it is behind the store's clock.
- ``stream_event_time_watermark_timestamp_seconds`` and
  ``stream_event_time_watermark_delay_seconds`` {stream}: the lowest event-time
  watermark its writers asserted on its open segments (absent while no
  writer is active), and how far it is behind the store's clock;
  ``stream_active_writers`` {stream}: the writers holding it;
  ``timed_out_writers_total``: writers the store marked idle after its
  idle timeout.
- Per reader group (``scope/group``), by the rules of
  :mod:`connector.groups.progress` and :mod:`connector.groups.stall` (the
  CLI's and the engines' too): ``reader_group_unread_events``, the events it
  has still to read; ``reader_group_watermark_timestamp_seconds``, its
  (ingestion) watermark; ``reader_group_processing_time_watermark_timestamp_seconds``
  and ``..._delay_seconds``, the ingestion time of its oldest unread event
  (or, with nothing unread, the least segment watermark) and how far that
  is behind the store's clock; ``reader_group_event_time_watermark_timestamp_seconds``
  and ``..._delay_seconds``, its event-time watermark (absent while not
  known); ``reader_group_diagnosis_info`` {group, diagnosis}: what the two
  delays say; ``reader_group_watermark_holder_info`` {group, domain, cause,
  segment, reader, writer}: what holds each watermark now.
- On a replicated store (JetStream), per log (a stream ``scope/stream``, the
  ``catalog`` or the ``state``) and replica (a node): ``replica_leader`` (1
  for the leader), ``replica_current`` (1 while up to date),
  ``replica_operations_behind`` (the replication lag, in operations) and
  ``replica_last_seen_seconds`` (since the leader heard from it), asked of
  the leaders at scrape time; ``leader_elections_total`` {log}: leader
  changes this server heard of.
- ``data_loss_reads_total`` {stream}: reads answered DATA_LOSS (an event
  failing its checksum); ``damaged_segments``: segments such a read met
  since the server started (:mod:`connector.ops.data_loss`).
- ``background_task_failed_rounds_total`` {task}: rounds of a background task
  (``idle_ticks``, ``journal_compaction``, ``health``; on JetStream also
  ``jetstream_probe`` and ``jetstream_catch_up``) that failed;
  ``background_task_last_success_timestamp_seconds`` {task}: when its last
  round succeeded (absent before one did); ``background_task_stalled`` {task}:
  1 while it has failed (or one round has run) for longer than its bound.

The HTTP port serves ``/metrics`` and ``/healthz``: 200 ``SERVING`` while
the store is healthy as the gRPC health service says (it takes writes and no
background task is stalled), 503 ``NOT_SERVING`` otherwise. The labels name
every tenant's streams and reader groups, and the port takes no token: let
only the operators' monitoring reach it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    make_wsgi_app,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from connector.background import TaskStatus
from connector.clock import Clock
from connector.errors import DataLossError, TidemarkError
from connector.groups.lag import group_lag
from connector.groups.progress import group_progress, writers_assert
from connector.groups.record import STATE_KEY_PREFIX, GroupRecord
from connector.groups.stall import Holder, StoreTiming, event_time_segment, why
from connector.groups.state import group_event_time, group_watermark
from connector.model import StateValue
from connector.ops.call_metrics import CallMetricsInterceptor
from connector.ops.data_loss import DataLossLog
from connector.ops.health import is_serving
from connector.store import Storage, StoreObserver
from connector.timestamps import END_OF_TIME

__all__ = ["StoreMetrics", "stream_of_segment"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def stream_of_segment(segment: str) -> str:
    """``scope/stream`` of a segment name ``scope/stream/N`` (the name itself otherwise)."""
    head, sep, _ = segment.rpartition("/")
    return head if sep else segment


class _StoreStateCollector(Collector):
    """Gauges read from the store when Prometheus scrapes."""

    def __init__(self, store: Storage):
        self._store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:  # noqa: D102
        store = self._store
        now = store.config.clock.now_ms()
        open_segments = GaugeMetricFamily(
            "tidemark_open_segments", "Segments not sealed, over every stream."
        )
        streams = GaugeMetricFamily("tidemark_streams", "Streams in the store.")
        watermark = GaugeMetricFamily(
            "tidemark_stream_tail_watermark_timestamp_seconds",
            "Lowest watermark of the stream's open segments (ingestion time, since the epoch).",
            labels=["stream"],
        )
        lag = GaugeMetricFamily(
            "tidemark_stream_tail_watermark_delay_seconds",
            "How far the stream's tail watermark is behind the store's clock.",
            labels=["stream"],
        )
        event_time = GaugeMetricFamily(
            "tidemark_stream_event_time_watermark_timestamp_seconds",
            "Lowest event-time watermark the writers asserted on the stream's open segments "
            "(event time, since the epoch; absent while no writer is active).",
            labels=["stream"],
        )
        event_time_lag = GaugeMetricFamily(
            "tidemark_stream_event_time_watermark_delay_seconds",
            "How far the stream's event-time watermark is behind the store's clock.",
            labels=["stream"],
        )
        writers = GaugeMetricFamily(
            "tidemark_stream_active_writers",
            "Writers holding the stream's event-time watermark (asserted, not idle).",
            labels=["stream"],
        )
        count = 0
        ids = store.stream_ids()
        for scope, stream in ids:
            try:  # from memory: no call per segment
                tails = [t for t in store.describe_tails(scope, stream).segments if not t.sealed]
                held = [t for t in tails if t.event_time_watermark is not None]
                active = {w.writer_id for t in held for w in store.segment_info(t.segment).writers}
            except TidemarkError:  # gone or closing while we looked
                continue
            count += len(tails)
            name = f"{scope}/{stream}"
            if tails:
                mark = min(t.watermark for t in tails)
                watermark.add_metric([name], mark / 1000)
                lag.add_metric([name], max(0, now - mark) / 1000)
            if held:
                least = min(t.event_time_watermark or 0 for t in held)
                event_time.add_metric([name], least / 1000)
                event_time_lag.add_metric([name], max(0, now - least) / 1000)
            writers.add_metric([name], len(active))
        open_segments.add_metric([], count)
        streams.add_metric([], len(ids))
        yield open_segments
        yield streams
        yield watermark
        yield lag
        yield event_time
        yield event_time_lag
        yield writers
        try:
            journal_bytes = store.journal_size()
        except OSError:
            journal_bytes = None
        if journal_bytes is not None:
            yield GaugeMetricFamily(
                "tidemark_journal_bytes", "Size of the store's journal.", value=journal_bytes
            )
        yield GaugeMetricFamily(
            "tidemark_parked_tail_reads",
            "Reads waiting at a segment's tail for data, a seal or a watermark rise.",
            value=store.parked_reads,
        )
        yield GaugeMetricFamily(
            "tidemark_accepting_writes",
            "1 while the store takes writes, 0 while it refuses them (full disk, failure).",
            value=1 if store.accepting_writes else 0,
        )


class _CallStateCollector(Collector):
    """The server's fetch sessions and parked calls, counted when Prometheus scrapes."""

    def __init__(
        self,
        sessions: Callable[[], tuple[int, int, int]],
        parked: Callable[[], dict[str, int]],
    ):
        self._sessions = sessions
        self._parked = parked

    def collect(self) -> Iterator[GaugeMetricFamily]:  # noqa: D102
        open_sessions, segments, armed = self._sessions()
        yield GaugeMetricFamily(
            "tidemark_fetch_sessions", "ReadSegments fetch sessions open.", value=open_sessions
        )
        yield GaugeMetricFamily(
            "tidemark_fetch_session_segments",
            "Segments the fetch sessions follow (their cursors).",
            value=segments,
        )
        yield GaugeMetricFamily(
            "tidemark_fetch_session_armed_segments",
            "Cursors armed: answered when their segment changes (the others wait for their "
            "reader to consume data).",
            value=armed,
        )
        parked = GaugeMetricFamily(
            "tidemark_parked_calls",
            "Calls parked until something changes, holding no thread, by method.",
            labels=["method"],
        )
        for method, count in sorted(self._parked().items()):
            parked.add_metric([method], count)
        yield parked


def _group_gauge(name: str, help_text: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"tidemark_reader_group_{name}", help_text, labels=["group", *labels])


class _ReaderGroupCollector(Collector):
    """Each reader group's figures and what holds its watermarks, read at scrape time."""

    def __init__(self, store: Storage):
        self._store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:  # noqa: D102
        unread = _group_gauge(
            "unread_events", "Events the reader group has still to read, over its segments."
        )
        watermark = _group_gauge(
            "watermark_timestamp_seconds",
            "The reader group's watermark (ingestion time, since the epoch).",
        )
        processing = _group_gauge(
            "processing_time_watermark_timestamp_seconds",
            "Ingestion time of the group's oldest unread event (a segment with nothing unread: "
            "its watermark), since the epoch.",
        )
        processing_delay = _group_gauge(
            "processing_time_watermark_delay_seconds",
            "How far the group's processing-time watermark is behind the store's clock.",
        )
        event = _group_gauge(
            "event_time_watermark_timestamp_seconds",
            "The group's event-time watermark: its writers' event time, or its ingestion "
            "watermark where no writer asserts one (absent while not known).",
        )
        event_delay = _group_gauge(
            "event_time_watermark_delay_seconds",
            "How far the group's event-time watermark is behind the store's clock.",
        )
        diagnosis = _group_gauge(
            "diagnosis_info",
            "1, labelled with what the group's two delays say: healthy, data_old_or_buffered, "
            "blocked_or_slow, watermark_stands_still or not_known.",
            "diagnosis",
        )
        holder = _group_gauge(
            "watermark_holder_info",
            "1, labelled with what holds the group's watermark now, per domain (ingestion_time, "
            "event_time): the cause, the segment and its reader or writer.",
            "domain",
            "cause",
            "segment",
            "reader",
            "writer",
        )
        store = self._store
        config = store.config
        timing = StoreTiming(
            config.max_watermark_lag_ms, config.polling_period_ms, config.writer_idle_timeout_ms
        )
        now = config.clock.now_ms()
        for key in store.state_keys(STATE_KEY_PREFIX):
            name = key.removeprefix(STATE_KEY_PREFIX)
            try:
                record = GroupRecord.from_json(store.get_state(key).value)
                lag = group_lag(record, store.plan_read)
                tails = {
                    t.segment: t
                    for stream in record.streams
                    for t in store.describe_tails(*stream.split("/", 1)).segments
                }
                held = event_time_segment(record)
                writers = {} if held is None else {held: store.segment_info(held).writers}
            except (TidemarkError, ValueError, KeyError, TypeError):
                continue  # gone, or its streams deleted, while we looked
            state = record.state
            mark = group_watermark(state)
            figures = group_progress(
                lag, mark, group_event_time(state), now, writers_assert=writers_assert(state, tails)
            )
            unread.add_metric([name], figures.unread_events)
            if 0 <= mark < END_OF_TIME:  # not a time: no segment left
                watermark.add_metric([name], mark / 1000)
            if figures.processing_time_watermark < END_OF_TIME:
                processing.add_metric([name], figures.processing_time_watermark / 1000)
            processing_delay.add_metric([name], figures.processing_time_delay_ms / 1000)
            if figures.event_time_watermark is not None:
                if figures.event_time_watermark < END_OF_TIME:
                    event.add_metric([name], figures.event_time_watermark / 1000)
                event_delay.add_metric([name], (figures.event_time_delay_ms or 0) / 1000)
            diagnosis.add_metric([name, figures.diagnosis.value], 1)
            stall = why(name, record, lag, tails, writers, timing, now)
            for held_by in (stall.ingestion_time, stall.event_time):
                if held_by is not None:
                    holder.add_metric([name, *_holder_labels(held_by)], 1)
        yield from (unread, watermark, processing, processing_delay, event, event_delay)
        yield diagnosis
        yield holder


def _holder_labels(holder: Holder) -> list[str]:
    return [
        holder.domain,
        holder.cause.value,
        holder.segment or "",
        holder.reader or "",
        holder.writer or "",
    ]


class _ReplicationCollector(Collector):
    """How each replicated log of the store stands, asked of its leaders when Prometheus scrapes.

    Empty for a store of one node (the file store).
    """

    def __init__(self, store: Storage):
        self._store = store

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:  # noqa: D102
        labels = ["log", "replica"]
        leader = GaugeMetricFamily(
            "tidemark_replica_leader",
            "1 for the replica that leads the log (a stream, the catalog or the state).",
            labels=labels,
        )
        current = GaugeMetricFamily(
            "tidemark_replica_current",
            "1 while the replica is up to date with its leader.",
            labels=labels,
        )
        behind = GaugeMetricFamily(
            "tidemark_replica_operations_behind",
            "How many operations the replica is behind its leader (replication lag).",
            labels=labels,
        )
        seen = GaugeMetricFamily(
            "tidemark_replica_last_seen_seconds",
            "How long ago the leader last heard from the replica.",
            labels=labels,
        )
        elections = CounterMetricFamily(
            "tidemark_leader_elections",
            "Leader elections of each log this server heard of since it started.",
            labels=["log"],
        )
        try:
            replicas = self._store.replication()
        except TidemarkError:  # the cluster cannot answer: the other metrics say so
            replicas = []
        for state in replicas:
            names = [state.log, state.replica]
            leader.add_metric(names, 1 if state.leader else 0)
            current.add_metric(names, 1 if state.current else 0)
            behind.add_metric(names, state.lag)
            if state.seen_ms_ago is not None:
                seen.add_metric(names, state.seen_ms_ago / 1000)
        for log, count in sorted(self._store.leader_changes().items()):
            elections.add_metric([log], count)
        yield leader
        yield current
        yield behind
        yield seen
        yield elections


class _BackgroundTaskCollector(Collector):
    """Each background task's failures, last success and stall, read when Prometheus scrapes."""

    def __init__(self, tasks: Callable[[], Iterable[TaskStatus]], clock: Clock):
        self._tasks = tasks
        self._clock = clock

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:  # noqa: D102
        failed = CounterMetricFamily(
            "tidemark_background_task_failed_rounds",
            "Rounds of a background task that failed (each is retried a period later).",
            labels=["task"],
        )
        last_success = GaugeMetricFamily(
            "tidemark_background_task_last_success_timestamp_seconds",
            "When the task's last round succeeded (store clock, seconds since the epoch).",
            labels=["task"],
        )
        stalled = GaugeMetricFamily(
            "tidemark_background_task_stalled",
            "1 while the task has failed, or one round has run, for longer than its bound.",
            labels=["task"],
        )
        now = self._clock.now_ms()
        for task in self._tasks():
            failed.add_metric([task.name], task.failed_rounds)
            if task.last_success_ms is not None:
                last_success.add_metric([task.name], task.last_success_ms / 1000)
            stalled.add_metric([task.name], 1 if task.stalled(now) else 0)
        yield failed
        yield last_success
        yield stalled


class _DataLossCollector(Collector):
    """Reads answered DATA_LOSS and the segments found damaged, from the server's log of them."""

    def __init__(self, log: DataLossLog):
        self._log = log

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:  # noqa: D102
        reads = CounterMetricFamily(
            "tidemark_data_loss_reads",
            "Reads answered DATA_LOSS: the event at their offset fails its checksum.",
            labels=["stream"],
        )
        for stream, count in sorted(self._log.reads().items()):
            reads.add_metric([stream], count)
        yield reads
        yield GaugeMetricFamily(
            "tidemark_damaged_segments",
            "Segments a read found damaged data in since the server started.",
            value=len(self._log.damaged()),
        )


class _Observer(StoreObserver):
    def __init__(self, groups: Histogram, ticks: Counter, timeouts: Counter):
        self._groups = groups
        self._ticks = ticks
        self._timeouts = timeouts

    def committed(self, changes: int) -> None:
        self._groups.observe(changes)

    def ticked(self, segments: int) -> None:
        self._ticks.inc(segments)

    def timed_out(self, writers: int) -> None:
        self._timeouts.inc(writers)


class StoreMetrics:
    """The metrics of one store server, in their own registry.

    ``background_tasks`` lists the statuses of the server's background tasks
    at scrape time (by default the store's own). :attr:`data_loss` records
    the reads answered DATA_LOSS (:meth:`data_loss_met`).
    """

    def __init__(
        self,
        store: Storage,
        background_tasks: Callable[[], Iterable[TaskStatus]] | None = None,
    ):
        disable_created_metrics()  # process-wide: no _created series next to any counter
        self.registry = CollectorRegistry()
        requests = Counter(
            "tidemark_requests",
            "Unary calls answered, by service, method and gRPC status code.",
            ["service", "method", "code"],
            registry=self.registry,
        )
        refusals = Counter(
            "tidemark_refused_requests",
            "Calls refused: unauthenticated, permission_denied, invalid_argument, or the limit "
            "a RESOURCE_EXHAUSTED met.",
            ["cause"],
            registry=self.registry,
        )
        #: Counts every call; the server's first interceptor.
        self.interceptor = CallMetricsInterceptor(requests, refusals)
        self.appended_events = Counter(
            "tidemark_appended_events",
            "Events stored (duplicates not counted).",
            ["stream"],
            registry=self.registry,
        )
        self.appended_bytes = Counter(
            "tidemark_appended_bytes",
            "Payload bytes of the events stored.",
            ["stream"],
            registry=self.registry,
        )
        self.append_seconds = Histogram(
            "tidemark_append_seconds",
            "Latency of AppendEvents calls, answered or refused.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.read_seconds = Histogram(
            "tidemark_read_seconds",
            "Latency of ReadSegment calls (a read at the tail includes its wait).",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        groups = Histogram(
            "tidemark_commit_group_changes",
            "Changes made durable together by one journal sync.",
            buckets=_GROUP_BUCKETS,
            registry=self.registry,
        )
        ticks = Counter(
            "tidemark_idle_ticks", "Idle ticks given to segments.", registry=self.registry
        )
        self.state_reads = Counter(
            "tidemark_state_reads",
            "GetState calls answered, with the value or unchanged (the caller holds it).",
            ["answer"],
            registry=self.registry,
        )
        self._state_read_children: dict[str, Any] = {}  # by answer, made at its first
        self.state_read_bytes = Counter(
            "tidemark_state_read_bytes",
            "Bytes of state values GetState calls answered with.",
            registry=self.registry,
        )
        timeouts = Counter(
            "tidemark_timed_out_writers",
            "Writers the store marked idle after they were silent for its idle timeout.",
            registry=self.registry,
        )
        self.registry.register(_StoreStateCollector(store))
        self.registry.register(_ReaderGroupCollector(store))
        self.registry.register(_ReplicationCollector(store))
        #: The damaged data the server's reads met.
        self.data_loss = DataLossLog()
        self.registry.register(_DataLossCollector(self.data_loss))
        self.registry.register(
            _BackgroundTaskCollector(
                background_tasks or store.background_status, store.config.clock
            )
        )
        ProcessCollector(registry=self.registry)
        store.observer = _Observer(groups, ticks, timeouts)
        tasks = background_tasks or store.background_status
        self._serving = lambda: is_serving(
            store.accepting_writes, tasks(), store.config.clock.now_ms()
        )
        self._http: WSGIServer | None = None

    def watch_calls(
        self,
        sessions: Callable[[], tuple[int, int, int]],
        parked: Callable[[], dict[str, int]],
    ) -> None:
        """Counts the server's fetch sessions (open, segments, armed) and parked calls by method."""
        self.registry.register(_CallStateCollector(sessions, parked))

    def data_loss_met(self, error: TidemarkError) -> None:
        """Records ``error`` if it is a DataLossError (a read met damaged data)."""
        if isinstance(error, DataLossError):
            self.data_loss.record(error)

    def state_read(self, value: StateValue) -> None:
        """Counts a GetState answer: ``unchanged``, or the value and its bytes."""
        answer = "unchanged" if value.unchanged else "value"
        child = self._state_read_children.get(answer)
        if child is None:  # made at the first such answer: no series before
            child = self._state_read_children[answer] = self.state_reads.labels(answer)
        child.inc()
        self.state_read_bytes.inc(len(value.value))

    def appended(self, segment: str, events: list[bytes] | tuple[bytes, ...]) -> None:
        """Counts ``events`` as stored in ``segment``."""
        stream = stream_of_segment(segment)
        self.appended_events.labels(stream).inc(len(events))
        self.appended_bytes.labels(stream).inc(sum(len(e) for e in events))

    @contextmanager
    def timing(self, histogram: Histogram) -> Iterator[None]:
        """Observes how long the block takes, whether it returns or raises."""
        start = time.perf_counter()
        try:
            yield
        finally:
            histogram.observe(time.perf_counter() - start)

    def serve(self, listen: str) -> int:
        """Serves ``/metrics`` and ``/healthz`` over HTTP on ``listen`` (``host:port``).

        Port 0: any free one. Returns the port.
        """
        host, _, port = listen.rpartition(":")
        host = host.strip("[]")
        server_class = _ThreadingWSGIServerV6 if ":" in host else _ThreadingWSGIServer
        app = _app(make_wsgi_app(self.registry), self._serving)
        server = make_server(host, int(port), app, server_class, handler_class=_QuietHandler)
        thread = threading.Thread(
            target=server.serve_forever, name="tidemark-metrics-http", daemon=True
        )
        thread.start()
        self._http = server
        return server.server_port

    def close(self) -> None:
        """Stops serving ``/metrics``."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _ThreadingWSGIServerV6(_ThreadingWSGIServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Logs nothing: a scrape every few seconds is not news."""


_TEXT = ("Content-Type", "text/plain; charset=utf-8")


def _app(metrics: Any, serving: Callable[[], bool]) -> Any:
    """The HTTP port: ``/metrics`` (Prometheus), ``/healthz`` (200 or 503), else 404."""

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return metrics(environ, start_response)
        if path == "/healthz":
            healthy = serving()
            # A fresh header list each time: the WSGI server adds Content-Length to it.
            start_response("200 OK" if healthy else "503 Service Unavailable", [_TEXT])
            return [b"SERVING\n" if healthy else b"NOT_SERVING\n"]
        start_response("404 Not Found", [_TEXT])
        return [b"not found: this port serves /metrics and /healthz\n"]

    return app
