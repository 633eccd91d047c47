"""The ``tidemark`` format in a Spark session: registration, schema, errors at ``load()``.

``load()`` checks every option, then the store once (it answers, the
streams and the segments a cut names exist). The option errors are found
before the store is asked: those reads point nowhere (:data:`NOWHERE`).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import StreamingQueryException
from pyspark.sql.types import BinaryType, StringType, TimestampType

from connector.reader.source import PROBE_BOUND_S, ProcessingTime
from spark_adapter.schema import tidemark_schema

pytestmark = pytest.mark.slow

NOWHERE = "tidemark://127.0.0.1:1"  # nothing listens there: the connection is refused


def reader(spark: Any, streaming: bool = False, **options: str) -> Any:
    settings = {"uri": NOWHERE, "stream": "iot/sensors", **options}
    source = spark.readStream if streaming else spark.read
    return source.format("tidemark").options(**settings)


@pytest.fixture
def existing(store_uri: str, new_stream: Callable[..., str]) -> dict[str, str]:
    """Options naming a store that answers and a stream it has."""
    return {"uri": store_uri, "stream": new_stream()}


@pytest.mark.parametrize("streaming", [False, True])
def test_registered_format_has_the_tidemark_columns(
    spark: Any, streaming: bool, existing: dict[str, str]
) -> None:
    schema = reader(spark, streaming, **existing).load().schema
    assert schema == tidemark_schema("string", ProcessingTime())
    assert schema["watermark"].metadata == {
        "tidemark.timeDomain": "ProcessingTime",
        "tidemark.hasWatermarks": False,
    }
    assert schema.fieldNames() == [
        "routing_key",
        "event",
        "event_time",
        "watermark",
        "kind",
        "segment",
        "offset",
        "ingestion_time",
        "late",
    ]
    assert isinstance(schema["watermark"].dataType, TimestampType)


def test_event_is_binary_for_the_bytes_deserializer(spark: Any, existing: dict[str, str]) -> None:
    assert isinstance(
        reader(spark, deserializer="bytes", **existing).load().schema["event"].dataType,
        BinaryType,
    )
    assert isinstance(
        reader(spark, deserializer="json", **existing).load().schema["event"].dataType,
        StringType,
    )


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"stream": "iot"}, "option 'stream' is 'iot'"),
        ({"timeDomain": "Whenever"}, "option 'timeDomain'"),
        ({"timeDomain": "IngestionTime", "maxEventTimeLag": "5 parsecs"}, "'5 parsecs'"),
        ({"startingStreamCut": '{"iot/sensors/0": "x"}'}, "offset 'x'"),
        ({"deserializer": "avro"}, "option 'deserializer'"),
        # Spark lower-cases option names before the source sees them.
        ({"maxEventsPerTriger": "5"}, "did you mean 'maxEventsPerTrigger'?"),
        # The option as documented, whatever case the user's typo had.
        ({"timestampFeild": "ts"}, "did you mean 'timestampField'?"),
        # Kafka's names are answered with the option that does the same.
        ({"startingOffsets": "latest"}, "'startingOffsets'; here it is 'startingStreamCut'"),
        ({"kafka.bootstrap.servers": "h:9092"}, "here it is 'uri'"),
        ({"subscribe": "topic"}, "here it is 'stream'"),
        ({"maxOffsetsPerTrigger": "5"}, "here it is 'maxEventsPerTrigger'"),
        ({"failOnDataLoss": "false"}, "Kafka's 'failOnDataLoss', which has no counterpart here"),
    ],
)
def test_an_invalid_option_fails_at_load_before_any_query(
    spark: Any, streaming: bool, options: dict[str, str], expected: str
) -> None:
    with pytest.raises(PySparkException) as error:
        reader(spark, streaming, **options).load()
    assert expected in str(error.value)


def test_a_batch_read_with_nothing_to_read_returns_no_rows(
    spark: Any, existing: dict[str, str]
) -> None:
    """PySpark reads one placeholder partition of its own when a source plans none."""
    assert reader(spark, **existing).load().collect() == []


def test_a_batch_read_with_a_trigger_limit_fails_when_planned(
    spark: Any, existing: dict[str, str]
) -> None:
    df = reader(spark, maxEventsPerTrigger="10", **existing).load()
    with pytest.raises(PySparkException, match="'maxEventsPerTrigger'.*streaming reads only"):
        df.collect()


def test_a_streaming_read_with_an_ending_cut_fails_as_its_source_starts(
    spark: Any, tmp_path: Any, existing: dict[str, str]
) -> None:
    df = reader(spark, streaming=True, endingStreamCut="latest", **existing).load()
    query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
    with pytest.raises(StreamingQueryException, match="'endingStreamCut'.*batch reads only"):
        query.awaitTermination(60)
    assert query.lastProgress is None  # failed before its first micro-batch


@pytest.mark.parametrize("streaming", [False, True])
def test_a_stream_the_store_does_not_have_fails_at_load(
    spark: Any, store_uri: str, streaming: bool
) -> None:
    source = spark.readStream if streaming else spark.read
    with pytest.raises(PySparkException, match="stream 'nowhere/missing' does not exist"):
        source.format("tidemark").options(uri=store_uri, stream="nowhere/missing").load()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that takes connections and never says a word, as a store whose process is stopped."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def timed_load(spark: Any, streaming: bool, **options: str) -> tuple[float, BaseException | None]:
    source = spark.readStream if streaming else spark.read
    began = time.monotonic()
    try:
        source.format("tidemark").options(**options).load()
    except PySparkException as error:
        return time.monotonic() - began, error
    return time.monotonic() - began, None


@pytest.mark.parametrize("streaming", [False, True])
def test_a_store_that_is_down_fails_load_within_the_probes_bound_naming_the_uri(
    spark: Any, streaming: bool, existing: dict[str, str], silent_port: int
) -> None:
    """Nothing listening, or a stopped process's port: ``load()`` fails, naming option and URI.

    The bound: what a healthy ``load()`` takes (measured here first: Spark
    starts a Python worker for it) plus the probe's bound (its 5 s timeout
    and the client's look at why, 2 s at most); the healthy time counts
    twice, for the noise of a shared machine. Before the probe,
    ``load()`` passed and the query failed at its first batch, 32 s later.
    """
    healthy, error = timed_load(spark, streaming, **existing)
    assert error is None
    silent = f"tidemark://127.0.0.1:{silent_port}"
    for uri in (NOWHERE, silent):
        elapsed, error = timed_load(spark, streaming, uri=uri, stream=existing["stream"])
        assert error is not None, f"load() passed with the store at {uri} down"
        assert f"option 'uri': the store {uri!r} cannot be reached" in str(error)
        assert elapsed < 2 * healthy + PROBE_BOUND_S, (uri, elapsed, healthy)


@pytest.mark.parametrize("option", ["startingStreamCut", "endingStreamCut"])
def test_a_cut_naming_a_segment_the_stream_lacks_fails_at_load_naming_the_option(
    spark: Any, existing: dict[str, str], option: str
) -> None:
    cut = f'{{"{existing["stream"]}/7": 0}}'
    with pytest.raises(PySparkException) as error:
        spark.read.format("tidemark").options(**existing, **{option: cut}).load()
    message = str(error.value)
    stream = existing["stream"]
    assert f"option {option!r}" in message
    assert f"names segment '{stream}/7', which stream '{stream}' does not have" in message
