"""Parsing and checking the ``tidemark`` options (plain Python, no Spark session)."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from connector.errors import InvalidArgumentError
from connector.names import StreamId
from connector.reader.events import TimeDomain
from connector.reader.source import ReadSpec, StreamCut
from connector.timestamps import FieldTimestampAssigner, IngestionTimeAssigner
from spark_adapter.kafka_options import _SINK, _SOURCE
from spark_adapter.options import (
    _SINK_OPTIONS,
    _SOURCE_OPTIONS,
    SinkOptions,
    for_batch,
    for_stream,
    idle_watermark_step_ms,
    min_partitions,
    parse_interval_ms,
    read_spec,
)

URI = "tidemark://127.0.0.1:9090"


def source(**options: str) -> ReadSpec:
    return read_spec({"uri": URI, "stream": "iot/sensors", **options})


def event_time_stamp(event: Any) -> int:
    """A timestamp assigner for ``timestampAssigner`` (``module:function``)."""
    return int(event["t"])


def test_defaults_read_strings_from_the_earliest_cut_in_processing_time() -> None:
    options = source()
    assert options.uri == URI
    assert options.stream_names == ["iot/sensors"]
    assert options.time.domain is TimeDomain.PROCESSING_TIME
    assert options.time.lag_ms is None  # no watermarks, so no lag
    assert options.start == StreamCut.earliest()
    assert options.end is None
    assert options.deserializer == "string"
    assert isinstance(options.time.assigner, IngestionTimeAssigner)


def test_every_option_parses_and_names_are_case_insensitive() -> None:
    options = read_spec(
        {
            "URI": URI,
            "stream": "iot/a, iot/b",
            "timedomain": "IngestionTime",
            "maxEventTimeLag": "1 minute 500 milliseconds",
            "timestampField": "ts",
            "startingStreamCut": '{"iot/a/0": 10, "iot/a/1": 0, "iot/b/0": 4}',
            "endingStreamCut": "latest",
            "maxEventsPerTrigger": "1000",
            "maxBytesPerTrigger": "1048576",
            "deserializer": "JSON",
            "checkpointLocation": "/tmp/somewhere",  # Spark adds it for stream writes
        }
    )
    assert options.stream_names == [str(StreamId("iot", "a")), str(StreamId("iot", "b"))]
    assert options.time.domain is TimeDomain.INGESTION_TIME
    assert options.time.lag_ms == 60_500
    assert options.start.as_dict() == {"iot/a/0": 10, "iot/a/1": 0, "iot/b/0": 4}
    assert options.end == StreamCut.latest()
    assert (options.budget.max_events, options.budget.max_bytes) == (1000, 1_048_576)
    assert options.deserializer == "json"
    assert isinstance(options.time.assigner, FieldTimestampAssigner)


def test_parsed_options_are_a_frozen_plain_value() -> None:
    options = source(startingStreamCut='{"iot/sensors/0": 7}')
    assert options == source(startingStreamCut='{"iot/sensors/0": 7}')
    assert hash(options) == hash(source(startingStreamCut='{"iot/sensors/0": 7}'))
    with pytest.raises(AttributeError):
        options.uri = "other"  # type: ignore[misc]
    assert options.start.to_json() == '{"iot/sensors/0": 7}'


def test_a_timestamp_assigner_names_an_importable_function() -> None:
    options = source(timestampAssigner=f"{__name__}:event_time_stamp", deserializer="json")
    assert options.time.assigner.extract_timestamp({"t": 42}, 0) == 42


@pytest.mark.parametrize(
    ("options", "option", "value"),
    [
        ({"uri": ""}, "uri", ""),
        ({"uri": "http://x"}, "uri", "http://x"),
        ({"stream": ""}, "stream", ""),
        ({"stream": "iot"}, "stream", "iot"),
        ({"stream": "iot/a,iot/a"}, "stream", "iot/a"),
        ({"stream": "iot/bad name"}, "stream", "bad name"),
        ({"timeDomain": "EventTime"}, "timeDomain", "EventTime"),
        ({"timeDomain": "IngestionTime", "maxEventTimeLag": "5"}, "maxEventTimeLag", "5"),
        (
            {"timeDomain": "IngestionTime", "maxEventTimeLag": "-5 seconds"},
            "maxEventTimeLag",
            "-5 seconds",
        ),
        (
            {"timeDomain": "IngestionTime", "maxEventTimeLag": "1 month"},
            "maxEventTimeLag",
            "1 month",
        ),
        ({"maxEventTimeLag": "5 seconds"}, "maxEventTimeLag", "5 seconds"),
        ({"timestampField": "ts"}, "timestampField", "ts"),
        ({"timestampField": "ts", "timestampAssigner": "m:f"}, "timestampAssigner", "m:f"),
        ({"timestampAssigner": "no_colon"}, "timestampAssigner", "no_colon"),
        ({"timestampAssigner": "no_such_module_x:f"}, "timestampAssigner", "no_such_module_x:f"),
        ({"startingStreamCut": "first"}, "startingStreamCut", "first"),
        ({"startingStreamCut": "{}"}, "startingStreamCut", "{}"),
        ({"startingStreamCut": '{"iot/sensors": 1}'}, "startingStreamCut", "iot/sensors"),
        ({"startingStreamCut": '{"iot/other/0": 1}'}, "startingStreamCut", "iot/other/0"),
        ({"startingStreamCut": '{"iot/sensors/0": -1}'}, "startingStreamCut", "-1"),
        ({"startingStreamCut": '{"iot/sensors/0": true}'}, "startingStreamCut", "True"),
        (
            {"stream": "iot/a,iot/b", "startingStreamCut": '{"iot/a/0": 1}'},
            "startingStreamCut",
            "iot/b",
        ),
        ({"endingStreamCut": "[1]"}, "endingStreamCut", "[1]"),
        ({"maxEventsPerTrigger": "0"}, "maxEventsPerTrigger", "0"),
        ({"maxBytesPerTrigger": "1k"}, "maxBytesPerTrigger", "1k"),
        ({"deserializer": "avro"}, "deserializer", "avro"),
        ({"startingOffsets": "earliest"}, "startingOffsets", "startingOffsets"),
        ({"path": "iot/sensors"}, "path", "iot/sensors"),
    ],
)
def test_each_invalid_option_is_named_with_its_value(
    options: dict[str, str], option: str, value: str
) -> None:
    settings = {"uri": URI, "stream": "iot/sensors", **options}
    with pytest.raises(InvalidArgumentError) as error:
        read_spec(settings)
    message = str(error.value)
    assert repr(option) in message or option in message, message
    assert value in message, message


def test_batch_reads_end_at_latest_by_default_and_refuse_trigger_limits() -> None:
    assert for_batch(source()).end == StreamCut.latest()
    cut = '{"iot/sensors/0": 99}'
    assert for_batch(source(endingStreamCut=cut)).end == StreamCut.offsets({"iot/sensors/0": 99})
    with pytest.raises(InvalidArgumentError, match="'maxEventsPerTrigger'.*streaming reads only"):
        for_batch(source(maxEventsPerTrigger="10"))


def test_streaming_reads_refuse_an_ending_cut() -> None:
    assert for_stream(source()) == source()
    with pytest.raises(InvalidArgumentError, match="'endingStreamCut'.*batch reads only"):
        for_stream(source(endingStreamCut="latest"))


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("5 seconds", 5_000),
        ("500 milliseconds", 500),
        ("1 minute", 60_000),
        ("interval 2 hours", 7_200_000),
        ("1 day 1 second", 86_401_000),
        ("1.5 seconds", 1_500),
        ("0 seconds", 0),
        ("1 week", 604_800_000),
        ("2000 microseconds", 2),
        ("10 Seconds", 10_000),
    ],
)
def test_parse_interval_ms_reads_spark_interval_strings(text: str, millis: int) -> None:
    assert parse_interval_ms(text) == millis


@pytest.mark.parametrize(
    "text", ["", "5", "seconds", "5 parsecs", "1 month", "1 year", "-1 second", "1 microsecond"]
)
def test_parse_interval_ms_refuses_what_is_not_a_fixed_interval(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'maxEventTimeLag'"):
        parse_interval_ms(text, "maxEventTimeLag")


def test_sink_options_default_to_the_read_schema_columns() -> None:
    options = SinkOptions.parse({"uri": URI, "stream": "iot/out", "checkpointLocation": "/x"})
    assert (options.stream, options.routing_key_column, options.event_column) == (
        StreamId("iot", "out"),
        "routing_key",
        "event",
    )
    assert options.write_id is None


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"stream": "iot/a,iot/b"}, "stream"),
        ({"writeId": "bad id"}, "writeId"),
        ({"eventColumn": " "}, "eventColumn"),
        ({"routingKeyColumn": ""}, "routingKeyColumn"),
        ({"deserializer": "json"}, "deserializer"),
        ({"uri": "nowhere"}, "uri"),
    ],
)
def test_each_invalid_sink_option_is_named(options: dict[str, str], option: str) -> None:
    with pytest.raises(InvalidArgumentError, match=repr(option)):
        SinkOptions.parse({"uri": URI, "stream": "iot/out", **options})


@pytest.mark.parametrize(
    ("given", "millis"),
    [
        ("1763158400123", 1_763_158_400_123),
        ("2025-11-14T22:13:20.123Z", 1_763_158_400_123),
        ("2025-11-14 23:13:20.123+01:00", 1_763_158_400_123),
    ],
)
def test_a_start_by_time_takes_epoch_milliseconds_or_iso_8601_with_a_zone(
    given: str, millis: int
) -> None:
    spec = read_spec({"uri": "tidemark://h:1", "stream": "a/b", "startingTimestamp": given})
    assert spec.start == StreamCut.at_time(millis)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"startingTimestamp": "2025-11-14T22:13:20"}, "option 'startingTimestamp' is"),
        ({"endingTimestamp": "yesterday"}, "option 'endingTimestamp' is 'yesterday'"),
        (
            {"endingTimestamp": "5", "endingStreamCut": "latest"},
            "options 'endingStreamCut' ('latest') and 'endingTimestamp' ('5') exclude each other",
        ),
    ],
)
def test_a_bad_time_or_a_time_beside_a_cut_is_named(options: dict[str, str], expected: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(expected)):
        read_spec({"uri": "tidemark://h:1", "stream": "a/b", **options})


def test_an_end_by_time_is_for_batch_reads_only() -> None:
    spec = read_spec({"uri": "tidemark://h:1", "stream": "a/b", "endingTimestamp": "5"})
    with pytest.raises(
        InvalidArgumentError, match="option 'endingTimestamp' .'5'. applies to batch"
    ):
        for_stream(spec)


def test_every_kafka_option_answered_names_an_option_the_format_takes() -> None:
    """The Kafka table never points at an option the format would refuse in turn."""
    for table, known in ((_SOURCE, _SOURCE_OPTIONS), (_SINK, _SINK_OPTIONS)):
        for kafka, option, _ in table.values():
            assert option is None or option in known, kafka
    with pytest.raises(InvalidArgumentError, match="here it is 'startingStreamCut'"):
        source(startingoffsets="earliest")  # as Spark passes it: lower case
    with pytest.raises(InvalidArgumentError, match="Kafka security setting"):
        source(**{"kafka.ssl.truststore.location": "/etc/ts.jks"})


def test_min_partitions_defaults_to_the_driver_s_cores_and_refuses_a_count_below_one() -> None:
    assert min_partitions({"uri": URI, "stream": "iot/sensors"}) == len(os.sched_getaffinity(0))
    assert min_partitions({"uri": URI, "stream": "iot/sensors", "minpartitions": "6"}) == 6
    with pytest.raises(InvalidArgumentError, match="option 'minPartitions' must be .* got '0'"):
        min_partitions({"uri": URI, "stream": "iot/sensors", "minPartitions": "0"})


def test_the_idle_watermark_step_defaults_to_any_rise_and_names_a_bad_value() -> None:
    settings = {"uri": URI, "stream": "iot/sensors"}
    assert idle_watermark_step_ms(settings) == 0
    assert idle_watermark_step_ms({**settings, "idlewatermarkstep": "5 seconds"}) == 5_000
    with pytest.raises(InvalidArgumentError, match="option 'idleWatermarkStep' .*'soon'"):
        idle_watermark_step_ms({**settings, "idleWatermarkStep": "soon"})
