"""A reading task's columns as Arrow rows (``spark_adapter.reading.arrow_batches``), no Spark."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from connector.errors import InvalidArgumentError
from connector.framing import encode_frames, iter_frames
from connector.reader.source import EventTimes, columns_of
from spark_adapter.options import read_spec
from spark_adapter.reading import arrow_batches
from spark_adapter.schema import tidemark_schema


def _rows(deserializer: str, reads: list[tuple[str, bytes, int]], **options: str) -> dict[str, Any]:
    """The Arrow rows of store reads ``(segment, data, offset)`` of a task, watermark 5,000."""
    spec = read_spec(
        {"uri": "127.0.0.1:1", "stream": "s/t", "deserializer": deserializer, **options}
    )
    times = EventTimes(spec.time, spec.deserializer)
    columns = [columns_of(segment, data, offset, times) for segment, data, offset in reads]
    schema = to_arrow_schema(tidemark_schema(deserializer), timezone="UTC")
    (batch,) = arrow_batches(iter(columns), 5_000, schema)
    return batch.to_pydict()


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def test_rows_of_two_reads_keep_their_segments_offsets_and_times() -> None:
    first = encode_frames([b'{"ts": 10}', b'{"ts": "1970-01-01T00:00:00.020Z"}'], 1_000, ["a", "b"])
    second = encode_frames([b'{"ts": 30}'], 2_000, None)
    reads = [("s/t/0", first, 0), ("s/t/1", second, 64)]

    batch = _rows("json", reads, timeDomain="IngestionTime", timestampField="ts")

    assert batch["routing_key"] == ["a", "b", None]
    assert batch["event"] == ['{"ts": 10}', '{"ts": "1970-01-01T00:00:00.020Z"}', '{"ts": 30}']
    assert batch["event_time"] == [_at(10), _at(20), _at(30)]
    assert batch["watermark"] == [_at(5_000)] * 3
    assert batch["kind"] == ["event"] * 3
    assert batch["segment"] == ["s/t/0", "s/t/0", "s/t/1"]
    assert batch["offset"] == [0, next(iter_frames(first)).end, 64]
    assert batch["ingestion_time"] == [_at(1_000), _at(1_000), _at(2_000)]


def test_an_event_without_its_timestamp_field_is_named() -> None:
    read = ("s/t/0", encode_frames([b'{"other": 1}'], 1_000, None), 0)
    with pytest.raises(InvalidArgumentError, match="has no timestamp field 'ts'"):
        _rows("json", [read], timeDomain="IngestionTime", timestampField="ts")


def test_text_that_is_not_utf8_names_the_event() -> None:
    data = encode_frames([b"fine", b"\xff\xfe"], 1_000, None)
    bad_offset = list(iter_frames(data, 128))[1].offset

    with pytest.raises(
        InvalidArgumentError, match=f"offset {bad_offset} of segment s/t/3 is not UTF-8"
    ):
        _rows("string", [("s/t/3", data, 128)])


def test_bytes_are_kept_as_they_are() -> None:
    batch = _rows("bytes", [("s/t/0", encode_frames([b"\xff\xfe", b""], 1_000, None), 0)])

    assert batch["event"] == [b"\xff\xfe", b""]
    assert batch["event_time"] == [_at(1_000)] * 2  # processing time: the ingestion time


def test_late_says_whether_each_event_is_at_or_below_its_watermark_in_force() -> None:
    """``late`` is the core's rule (``EventColumns.late``), computed on arrays, per read."""
    spec = read_spec(
        {"uri": "127.0.0.1:1", "stream": "s/t", "deserializer": "json", "timestampField": "ts"}
        | {"timeDomain": "IngestionTime"}
    )
    times = EventTimes(spec.time, spec.deserializer)
    stamps = [b'{"ts": 19}', b'{"ts": 20}', b'{"ts": 21}']
    columns = [
        columns_of("s/t/0", encode_frames(stamps, 1_000, None), 0, times, 20),
        columns_of("s/t/1", encode_frames(stamps, 1_000, None), 0, times, None),
        columns_of("s/t/2", encode_frames(stamps[:1], 1_000, None), 0, times, 5),
    ]
    schema = to_arrow_schema(tidemark_schema("json"), timezone="UTC")
    (batch,) = arrow_batches(iter(columns), 5_000, schema)

    assert batch.to_pydict()["late"] == [True, True, False, False, False, False, False]
    assert batch.to_pydict()["late"] == [flag for part in columns for flag in part.late]
