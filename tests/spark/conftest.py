"""Fixtures of the Spark tests: one SparkSession for the whole run, one real store server.

The session runs in local mode with two task threads and ``local[2,2]``, so
a failed task is retried once (local mode retries nothing otherwise): the
sink tests rely on that to show that a retried task appends nothing twice.
Spark's Python workers run this interpreter. The store is
:func:`connector.embedded_store`: the real gRPC server in this process, which
Spark's worker processes reach by its URI. Each test writes to streams of its
own, so tests share the server without seeing each other's events.
"""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from connector import EventWriter, JsonSerializer, StoreClient, embedded_store
from connector.devtools.local_cluster import LocalCluster
from connector.framing import iter_frames
from connector.server import StoreServer
from connector.store.jetstream import JetStreamConfig
from tests.conftest import new_stream_in

from . import flaky_sink, scripted_source


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The SparkSession all Spark tests share; ``tidemark`` and the test formats are registered."""
    from pyspark import cloudpickle

    from spark_adapter import local_session

    # The test-only data sources live in this test package, which Spark's
    # workers cannot import: ship their code by value.
    cloudpickle.register_pickle_by_value(scripted_source)
    cloudpickle.register_pickle_by_value(flaky_sink)
    session = local_session(
        "tidemark-tests",
        "local[2,2]",
        {
            "spark.default.parallelism": "2",
            "spark.sql.streaming.stateStore.maintenanceInterval": "600s",
            "spark.driver.memory": "1g",
        },
    )
    session.dataSource.register(scripted_source.ScriptedSource)
    session.dataSource.register(flaky_sink.FlakyTidemarkDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def file_store_uri() -> Iterator[str]:
    """The URI of a real file store server shared by the Spark tests."""
    with embedded_store() as uri:
        yield uri


@pytest.fixture(scope="session")
def jetstream_store_uri(nats_cluster: LocalCluster) -> Iterator[str]:
    """The URI of a real JetStream store server, on the shared cluster, for the Spark tests."""
    config = JetStreamConfig(servers=tuple(nats_cluster.urls), namespace="spark-tests")
    with StoreServer(config, listen="127.0.0.1:0") as server:
        yield server.uri


@pytest.fixture
def store_uri(storage: str, request: pytest.FixtureRequest) -> str:
    """The URI of the shared store server of this test's storage (the file store unless marked)."""
    return request.getfixturevalue(f"{storage}_store_uri")


@pytest.fixture
def new_stream(store_uri: str) -> Callable[..., str]:
    """Creates streams of this test's own: ``new_stream(segments=2)`` returns ``scope/stream``."""

    def create(segments: int = 2) -> str:
        with StoreClient(store_uri) as client:
            return new_stream_in(client, segments)

    return create


def stored_events(uri: str, stream: str) -> dict[str, list[tuple[str | None, bytes]]]:
    """Every ``(routing key, payload)`` the store holds in ``stream``, by segment, in order."""
    scope, name = stream.split("/")
    events: dict[str, list[bytes]] = {}
    with StoreClient(uri) as client:
        for segment in client.describe_stream(scope, name).segments:
            end = client.segment_info(segment.segment).write_offset
            offset, payloads = 0, []
            while offset < end:
                result = client.read(segment.segment, offset)
                payloads += [
                    (f.routing_key, f.payload) for f in iter_frames(result.data, result.offset)
                ]
                offset = result.next_offset
            events[segment.segment] = payloads
    return events


def stored_json(uri: str, stream: str) -> list[dict[str, Any]]:
    """The JSON events the store holds in ``stream``, segment by segment."""
    return [
        json.loads(payload)
        for events in stored_events(uri, stream).values()
        for _, payload in events
    ]


@pytest.fixture(name="stored_events")
def _stored_events() -> Callable[[str, str], dict[str, list[tuple[str | None, bytes]]]]:
    """:func:`stored_events`, as a fixture."""
    return stored_events


# --- a store on a synthetic clock, for the tests against the real source -------


class SyntheticStore:
    """A real store server in this process whose ingestion clock moves only when the test says.

    Spark's Python workers reach it over gRPC by :attr:`uri`; the clock lives
    in the test process. There is no idle advancer: :meth:`advance` moves the
    clock and ticks every idle segment, so with nothing written and nothing
    advanced the offsets stay where they are and ``processAllAvailable()``
    returns.
    """

    def __init__(self, server: Any, clock: Any):
        self.server = server
        self.clock = clock
        self.uri: str = server.uri
        self.client = StoreClient(server.uri)

    def create_stream(self, segments: int = 2) -> str:
        """A new stream of its own scope; returns its name."""
        return new_stream_in(self.client, segments)

    def advance(self, delta_ms: int) -> int:
        """Lets ``delta_ms`` pass and ticks every idle segment; returns the new time."""
        now = self.clock.advance(delta_ms)
        self.server.store.advance_idle_segments()
        return now

    def advance_to(self, now_ms: int) -> int:
        """Sets the clock to ``now_ms`` (forwards) and ticks every idle segment."""
        assert now_ms >= self.clock.now_ms(), "the synthetic clock only moves forwards here"
        return self.advance(now_ms - self.clock.now_ms())

    def writer(self, stream: str, serializer: Any = None) -> EventWriter[Any]:
        """An event writer on ``stream`` (JSON events unless told)."""
        return EventWriter(self.client, stream, serializer or JsonSerializer())

    def segments(self, stream: str) -> list[Any]:
        """The stream's segment descriptions, every one it ever had."""
        scope, name = stream.split("/")
        return list(self.client.describe_stream(scope, name).segments)

    def cut(self, stream: str) -> dict[str, int]:
        """The tail of every open segment: a stream cut as the ``*StreamCut`` options take it."""
        return {
            s.segment: self.client.segment_info(s.segment).write_offset
            for s in self.segments(stream)
            if not s.sealed
        }

    def group_watermark(self, stream: str) -> int:
        """The minimum watermark over the stream's open segments, as the store has it now."""
        return min(
            self.client.segment_info(s.segment).watermark
            for s in self.segments(stream)
            if not s.sealed
        )

    def close(self) -> None:
        """Closes the test's client; the server stops with its fixture."""
        self.client.close()


@pytest.fixture
def synthetic_store(start_store: Callable[..., Any], clock: Any) -> Iterator[SyntheticStore]:
    """A :class:`SyntheticStore` that ticks a segment idle for 1 ms or more."""
    store = SyntheticStore(start_store(max_watermark_lag_ms=0), clock)
    yield store
    store.close()


def ingestion_read(spark: Any, store: SyntheticStore, stream: str, lag_ms: int) -> Any:
    """``stream`` in the ingestion-time domain, event time from the ``ts`` field of JSON events."""
    return (
        spark.readStream.format("tidemark")
        .option("uri", store.uri)
        .option("stream", stream)
        .option("timeDomain", "IngestionTime")
        .option("maxEventTimeLag", f"{lag_ms} milliseconds")
        .option("deserializer", "json")
        .option("timestampField", "ts")
        .load()
    )


class BatchLog:
    """A ``foreachBatch`` function that keeps every micro-batch's rows, by batch id.

    A batch that runs again (after a failure or a restart) replaces what its
    earlier attempt left, as an idempotent sink does; :attr:`attempts` keeps
    every attempt. ``after_first(batch_id)``, when given, runs after the
    first attempt of each batch was recorded (to block or fail it).
    """

    def __init__(self, after_first: Callable[[int], None] | None = None):
        self.attempts: list[tuple[int, list[dict[str, Any]]]] = []
        self.after_first = after_first
        self._lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = [row.asDict() for row in frame.collect()]
        with self._lock:
            first = all(b != batch_id for b, _ in self.attempts)
            self.attempts.append((batch_id, rows))
        if first and self.after_first is not None:
            self.after_first(batch_id)

    @property
    def batches(self) -> dict[int, list[dict[str, Any]]]:
        """The rows of each batch id's last attempt."""
        with self._lock:
            return dict(self.attempts)

    def rows(self) -> list[dict[str, Any]]:
        """Every row of :attr:`batches`, in batch order."""
        return [row for _, rows in sorted(self.batches.items()) for row in rows]


def settle(*queries: Any) -> None:
    """``processAllAvailable`` on each query in turn: with a synthetic clock, it returns."""
    for query in queries:
        query.processAllAvailable()


def read_to_end(frame: Any, sink: Callable[[Any, int], None], checkpoint: pathlib.Path) -> Any:
    """Runs ``frame`` into ``foreachBatch(sink)`` until it read everything; the stopped query."""
    query = frame.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    running = query.start()
    try:
        settle(running)
    finally:
        running.stop()
    return running
