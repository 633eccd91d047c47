"""Reads that can only produce nothing are refused when the plan is built, naming why.

Each on a real store server and the shared Spark session; nothing here
starts a query: the refusal comes before one could run and show nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import PySparkException

import spark_adapter
from connector import EventWriter, JsonSerializer, StoreClient
from connector.errors import InvalidArgumentError
from tests.conftest import new_stream_in

pytestmark = pytest.mark.slow


@pytest.fixture
def stream(file_store_uri: str) -> str:
    """A stream of this test's own with one event."""
    with StoreClient(file_store_uri) as client:
        name = new_stream_in(client, 1)
        with EventWriter(client, name, JsonSerializer()) as writer:
            writer.write_event({"ts": 1}, routing_key="k")
    return name


def _readings(spark: Any, uri: str, stream: str, **options: str) -> Any:
    return (
        spark.readStream.format("tidemark")
        .options(uri=uri, stream=stream, deserializer="json", **options)
        .load()
    )


HELPERS = {
    "event_time": spark_adapter.event_time,
    "with_connector_watermark": spark_adapter.with_connector_watermark,
    "window_count": lambda df: spark_adapter.window_count(
        spark_adapter.with_connector_watermark(df), "1 minute"
    ),
    "order_by_event_time": lambda df: spark_adapter.order_by_event_time(
        spark_adapter.with_connector_watermark(df)
    ),
}


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_an_event_time_helper_on_a_read_without_watermarks_names_time_domain(
    spark: Any, file_store_uri: str, stream: str, helper: str
) -> None:
    """The default time domain has no watermarks: every window would wait forever."""
    readings = _readings(spark, file_store_uri, stream)  # timeDomain: ProcessingTime
    with pytest.raises(InvalidArgumentError, match="option 'timeDomain' is 'ProcessingTime'"):
        HELPERS[helper](readings)
    explicit = _readings(spark, file_store_uri, stream, timeDomain="ProcessingTime")
    with pytest.raises(InvalidArgumentError, match="'IngestionTime'"):
        HELPERS[helper](explicit)


def test_event_time_after_spark_s_own_watermark_on_event_time_is_refused(
    spark: Any, file_store_uri: str, stream: str
) -> None:
    readings = _readings(spark, file_store_uri, stream, timeDomain="IngestionTime")
    habit = readings.withWatermark("event_time", "5 seconds")
    with pytest.raises(InvalidArgumentError, match=r"withWatermark\('event_time'"):
        spark_adapter.event_time(habit)
    assert "event_time" in spark_adapter.event_time(readings).columns  # the right way passes


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"startingStreamCut": "latest"}, "'startingStreamCut' .*'latest'.* reads nothing"),
        (
            {"startingTimestamp": "2000", "endingTimestamp": "2000"},
            "'startingTimestamp' .* is not before option 'endingTimestamp'",
        ),
    ],
)
def test_a_batch_read_that_can_only_be_empty_is_refused(
    spark: Any, file_store_uri: str, stream: str, options: dict[str, str], match: str
) -> None:
    read = spark.read.format("tidemark").options(uri=file_store_uri, stream=stream, **options)
    with pytest.raises(PySparkException, match=match):
        read.load().collect()
