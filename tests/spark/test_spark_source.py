"""The ``tidemark`` format in a Spark session: registration, schema, option errors before a query.

The URI points nowhere: every case here stops before the readers
(:mod:`spark_adapter.reading`) would call the store.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import StreamingQueryException
from pyspark.sql.types import BinaryType, StringType, TimestampType

from spark_adapter.schema import tidemark_schema

pytestmark = pytest.mark.slow

URI = "tidemark://127.0.0.1:1"  # never connected to: these reads stop before any store call


def reader(spark: Any, streaming: bool = False, **options: str) -> Any:
    settings = {"uri": URI, "stream": "iot/sensors", **options}
    source = spark.readStream if streaming else spark.read
    return source.format("tidemark").options(**settings)


@pytest.mark.parametrize("streaming", [False, True])
def test_registered_format_has_the_tidemark_columns(spark: Any, streaming: bool) -> None:
    schema = reader(spark, streaming).load().schema
    assert schema == tidemark_schema("string")
    assert schema.fieldNames() == [
        "routing_key",
        "event",
        "event_time",
        "watermark",
        "kind",
        "segment",
        "offset",
        "ingestion_time",
    ]
    assert isinstance(schema["watermark"].dataType, TimestampType)


def test_event_is_binary_for_the_bytes_deserializer(spark: Any) -> None:
    assert isinstance(
        reader(spark, deserializer="bytes").load().schema["event"].dataType, BinaryType
    )
    assert isinstance(
        reader(spark, deserializer="json").load().schema["event"].dataType, StringType
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
    ],
)
def test_an_invalid_option_fails_at_load_before_any_query(
    spark: Any, streaming: bool, options: dict[str, str], expected: str
) -> None:
    with pytest.raises(PySparkException) as error:
        reader(spark, streaming, **options).load()
    assert expected in str(error.value)


def test_a_batch_read_with_a_trigger_limit_fails_when_planned(spark: Any) -> None:
    df = reader(spark, maxEventsPerTrigger="10").load()
    with pytest.raises(PySparkException, match="'maxEventsPerTrigger'.*streaming reads only"):
        df.collect()


def test_a_streaming_read_with_an_ending_cut_fails_as_its_source_starts(
    spark: Any, tmp_path: Any
) -> None:
    df = reader(spark, streaming=True, endingStreamCut="latest").load()
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
