"""The builder checks every option at build(), in Python, naming the option."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from connector.errors import InvalidArgumentError
from connector.reader.timestamps import FieldTimestampAssigner
from connector.security import ClientCredentials
from flink_adapter import FlinkTidemarkReader, StreamCut, TimeDomain


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
        .build()
    )
    settings = reader.settings
    spec = settings.spec
    assert spec.time.domain is TimeDomain.INGESTION_TIME
    assert (spec.time.assigner, spec.time.lag_ms) == (FieldTimestampAssigner("ts"), 5_000)
    assert (settings.parallelism, spec.call_timeout_ms) == (3, 2_000)
    assert settings.uid_prefix == "sensors-source"
    assert spec.streams[0].start == StreamCut.earliest() and not spec.bounded


def test_the_processing_time_domain_is_the_default_and_plans_no_watermark():
    spec = _builder().build().settings.spec
    assert spec.time.domain is TimeDomain.PROCESSING_TIME and not spec.time.has_watermarks


def test_credentials_go_into_the_uri_as_files():
    credentials = ClientCredentials(tls_ca_file="ca.pem", token_file="t.token")
    reader = (
        FlinkTidemarkReader.builder()
        .with_store("tidemark://h:1", credentials=credentials)
        .for_stream("iot/s")
        .build()
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
        (lambda b: b.with_parallelism(0), "with_parallelism"),
        (lambda b: b.with_reader_group_name("no spaces"), "with_reader_group_name"),
        (lambda b: b.with_epoch_interval(0), "with_epoch_interval"),
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
