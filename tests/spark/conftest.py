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

import os
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest

from connector import StoreClient, StreamManager, embedded_store
from connector.framing import iter_frames

from . import flaky_sink, scripted_source


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The SparkSession all Spark tests share; ``tidemark`` and the test formats are registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    import spark_adapter

    # The test-only data sources live in this test package, which Spark's
    # workers cannot import: ship their code by value.
    cloudpickle.register_pickle_by_value(scripted_source)
    cloudpickle.register_pickle_by_value(flaky_sink)
    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("tidemark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "600s")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    spark_adapter.register(session)
    session.dataSource.register(scripted_source.ScriptedSource)
    session.dataSource.register(flaky_sink.FlakyTidemarkDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def store_uri() -> Iterator[str]:
    """The URI of a real store server shared by the Spark tests."""
    with embedded_store() as uri:
        yield uri


@pytest.fixture
def new_stream(store_uri: str) -> Callable[..., str]:
    """Creates streams of this test's own: ``new_stream(segments=2)`` returns ``scope/stream``."""

    def create(segments: int = 2) -> str:
        scope = f"t{uuid.uuid4().hex[:12]}"
        with StoreClient(store_uri) as client:
            manager = StreamManager(client)
            manager.create_scope(scope)
            manager.create_stream(scope, "events", segment_count=segments)
        return f"{scope}/events"

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


@pytest.fixture(name="stored_events")
def _stored_events() -> Callable[[str, str], dict[str, list[tuple[str | None, bytes]]]]:
    """:func:`stored_events`, as a fixture."""
    return stored_events
