"""What adding the source does to a job's own settings, on a mini-cluster over a real store."""

from __future__ import annotations

from typing import Any

import pytest
from pyflink.table import StreamTableEnvironment

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from flink_adapter import FlinkTidemarkReader, TimeDomain
from flink_adapter.graph import (
    BUNDLE_TIME_KEY,
    BUNDLE_TIME_MS,
    WATERMARK_INTERVAL_MS,
)
from tests.flink.conftest import environment

pytestmark = pytest.mark.slow


def _store_with_events(start_store: Any, count: int) -> str:
    """A store server whose stream ``w/s`` holds ``count`` JSON events; its URI."""
    server = start_store()
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("w")
        StreamManager(client).create_stream("w", "s", 2)
        with EventWriter(client, "w/s", JsonSerializer()) as writer:
            for n in range(count):
                writer.write_event({"n": n, "ts": 1_000 + n}, routing_key=f"k{n % 3}")
    return server.uri


def _reader(uri: str, domain: TimeDomain) -> FlinkTidemarkReader:
    return (
        FlinkTidemarkReader.builder()
        .with_store(uri)
        .for_stream("w/s", start="earliest", end="latest")
        .with_deserialization_schema("json")
        .with_time_domain(domain)
        .build()
    )


def _table_config(t_env: Any) -> Any:
    return t_env.get_config().get_configuration()


def test_a_job_keeps_its_own_buffer_timeout_watermark_interval_and_bundle_time(
    start_store,
) -> None:
    uri = _store_with_events(start_store, 12)
    env = environment()
    env.set_buffer_timeout(50)
    env.get_config().set_auto_watermark_interval(300)
    t_env = StreamTableEnvironment.create(env)
    t_env.get_config().set(BUNDLE_TIME_KEY, "700")

    table = _reader(uri, TimeDomain.INGESTION_TIME).create_table(env, t_env)

    assert env.get_buffer_timeout() == 50
    assert env.get_config().get_auto_watermark_interval() == 300
    assert _table_config(t_env).get_string(BUNDLE_TIME_KEY, "") == "700"
    with table.select(table.event).execute().collect() as results:
        read = sorted(row[0] for row in results)
    assert len(read) == 12, read


def test_a_job_without_settings_gets_only_what_the_sources_time_domain_needs(
    start_store,
) -> None:
    uri = _store_with_events(start_store, 3)
    env = environment()
    t_env = StreamTableEnvironment.create(env)
    _reader(uri, TimeDomain.PROCESSING_TIME).create_table(env, t_env)
    # No watermarks: the job's watermark interval and buffer timeout are Flink's defaults.
    assert env.get_buffer_timeout() == 100
    assert env.get_config().get_auto_watermark_interval() == 200
    assert _table_config(t_env).get_string(BUNDLE_TIME_KEY, "") == str(BUNDLE_TIME_MS)

    env = environment()
    t_env = StreamTableEnvironment.create(env)
    table = _reader(uri, TimeDomain.INGESTION_TIME).create_table(env, t_env)
    assert env.get_buffer_timeout() == 100
    assert env.get_config().get_auto_watermark_interval() == WATERMARK_INTERVAL_MS
    with table.select(table.event).execute().collect() as results:
        assert len(list(results)) == 3
