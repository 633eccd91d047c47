"""The builder checks every option at build(), in Python, naming the option."""

from __future__ import annotations

import re
import socket
import time
from datetime import timedelta

import pytest

from connector import StoreClient, StreamManager
from connector.errors import InvalidArgumentError, NotFoundError, StoreUnavailableError
from connector.reader.source import PROBE_BOUND_S
from connector.security import ClientCredentials
from connector.timestamps import FieldTimestampAssigner
from flink_adapter import FlinkTidemarkReader, StreamCut, TimeDomain
from tests.flink.rest import free_port


def _builder():
    return FlinkTidemarkReader.builder().with_store("tidemark://127.0.0.1:7070").for_stream("iot/s")


def test_a_complete_builder_gives_the_settings_it_was_told():
    reader = (
        _builder()
        .with_deserialization_schema("json")
        .with_time_domain("IngestionTime")
        .with_timestamp_assigner("ts")
        .with_max_event_time_lag(timedelta(seconds=5))
        .with_reader_group_name("dashboards")
        .uid("sensors-source")
        .with_event_read_timeout(2_000)
        .with_parallelism(3)
        .build(check_store=False)
    )
    settings = reader.settings
    spec = settings.spec
    assert spec.time.domain is TimeDomain.INGESTION_TIME
    assert (spec.time.assigner, spec.time.lag_ms) == (FieldTimestampAssigner("ts"), 5_000)
    assert (settings.parallelism, spec.call_timeout_ms) == (3, 2_000)
    assert settings.uid_prefix == "sensors-source"
    assert spec.streams[0].start == StreamCut.earliest() and not spec.bounded


def test_the_processing_time_domain_is_the_default_and_plans_no_watermark():
    spec = _builder().build(check_store=False).settings.spec
    assert spec.time.domain is TimeDomain.PROCESSING_TIME and not spec.time.has_watermarks


def test_an_epoch_is_planned_every_50_ms_unless_told_otherwise():
    assert _builder().build(check_store=False).settings.epoch_interval_ms == 50
    told = _builder().with_epoch_interval(timedelta(milliseconds=250)).build(check_store=False)
    assert told.settings.epoch_interval_ms == 250


def test_an_epoch_after_an_idle_one_waits_250_ms_on_the_store_unless_told_otherwise():
    assert _builder().build(check_store=False).settings.idle_wait_ms == 250
    told = _builder().with_idle_wait(timedelta(seconds=30)).build(check_store=False)
    assert told.settings.idle_wait_ms == 30_000
    assert _builder().with_idle_wait(0).build(check_store=False).settings.idle_wait_ms == 0


def test_credentials_go_into_the_uri_as_files():
    credentials = ClientCredentials(tls_ca_file="ca.pem", token_file="t.token")
    reader = (
        FlinkTidemarkReader.builder()
        .with_store("tidemark://h:1", credentials=credentials)
        .for_stream("iot/s")
        .build(check_store=False)
    )
    assert reader.settings.spec.uri == "tidemark://h:1?tls_ca_file=ca.pem&token_file=t.token"


@pytest.mark.parametrize(
    ("configure", "named"),
    [
        (lambda b: FlinkTidemarkReader.builder().for_stream("a/b"), "with_store"),
        (lambda b: FlinkTidemarkReader.builder().with_store("tidemark://h:1"), "for_stream"),
        (lambda b: b.with_store("http://nowhere"), "with_store"),
        (lambda b: b.for_stream("not a stream"), "for_stream"),
        (lambda b: b.for_stream("iot/s"), "named twice"),
        (lambda b: b.with_deserialization_schema("avro"), "with_deserialization_schema"),
        (lambda b: b.with_time_domain("EventTime"), "with_time_domain"),
        (lambda b: b.with_timestamp_assigner("ts"), "reads a field of JSON events"),
        (lambda b: b.with_max_event_time_lag(-1), "with_max_event_time_lag"),
        (
            lambda b: b.with_time_domain("IngestionTime").with_watermark_percentile(1.5),
            "with_watermark_percentile",
        ),
        (lambda b: b.with_watermark_percentile(0.9), "with_watermark_percentile"),
        (lambda b: b.with_parallelism(0), "with_parallelism"),
        (lambda b: b.with_reader_group_name("no spaces"), "with_reader_group_name"),
        (lambda b: b.with_epoch_interval(0), "with_epoch_interval"),
        (lambda b: b.with_idle_wait(-1), r"with_idle_wait .*got -1"),
        (lambda b: b.with_idle_wait(timedelta(seconds=31)), r"with_idle_wait: .*got 31000 ms"),
        (lambda b: b.with_epoch_budget(max_events=0), "with_epoch_budget"),
        (lambda b: b.for_stream("iot/t", start="sideways"), "for_stream start"),
        (lambda b: b.for_stream("iot/t", end="latest"), "bounded read"),
    ],
)
def test_a_bad_option_is_refused_at_build_naming_it(configure, named):
    with pytest.raises(InvalidArgumentError, match=named) as refused:
        configure(_builder()).build()
    method = re.match(r"(with_\w+|for_stream)", named)
    if method is not None:
        assert str(refused.value).count(method.group(1)) == 1, "the method named once"


def test_build_refuses_a_store_where_nothing_listens_at_once_naming_it():
    uri = f"tidemark://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match=r"^with_store: the store .*127\.0\.0\.1"):
        FlinkTidemarkReader.builder().with_store(uri).for_stream("iot/s").build()
    assert time.monotonic() - started < PROBE_BOUND_S


def test_build_refuses_a_store_that_does_not_answer_within_the_bound():
    with socket.socket() as silent:  # takes connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        uri = f"tidemark://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match=r"^with_store: the store"):
            FlinkTidemarkReader.builder().with_store(uri).for_stream("iot/s").build()
        assert time.monotonic() - started < PROBE_BOUND_S + 1


def test_build_refuses_a_stream_that_does_not_exist_naming_for_stream(start_store):
    server = start_store()
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("iot")
        StreamManager(client).create_stream("iot", "sensors", 1)
    with pytest.raises(NotFoundError, match=r"^for_stream: stream 'iot/nope' does not exist"):
        FlinkTidemarkReader.builder().with_store(server.uri).for_stream("iot/nope").build()
    reader = FlinkTidemarkReader.builder().with_store(server.uri).for_stream("iot/sensors").build()
    assert reader.settings.spec.stream_names == ["iot/sensors"]
