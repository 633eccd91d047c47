"""The reading task's row building (``spark_adapter.reading._Rows``), without Spark."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from connector.errors import InvalidArgumentError
from connector.framing import encode_frames, iter_frames
from spark_adapter.options import TidemarkOptions
from spark_adapter.reading import _arrow_schema, _Rows
from spark_adapter.schema import tidemark_schema


def _rows(deserializer: str, **options: str) -> _Rows:
    parsed = TidemarkOptions.parse(
        {"uri": "127.0.0.1:1", "stream": "s/t", "deserializer": deserializer, **options}
    )
    return _Rows(parsed.for_stream(), watermark=5_000)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def test_rows_of_two_reads_keep_their_segments_offsets_and_times() -> None:
    rows = _rows("json", timeDomain="IngestionTime", timestampField="ts")
    first = encode_frames([b'{"ts": 10}', b'{"ts": "1970-01-01T00:00:00.020Z"}'], 1_000, ["a", "b"])
    second = encode_frames([b'{"ts": 30}'], 2_000, None)
    rows.add("s/t/0", first, 0)
    rows.add("s/t/1", second, 64)

    batch = rows.flush(_arrow_schema(tidemark_schema("json"))).to_pydict()

    assert rows.size == 0
    assert batch["routing_key"] == ["a", "b", None]
    assert batch["event"] == ['{"ts": 10}', '{"ts": "1970-01-01T00:00:00.020Z"}', '{"ts": 30}']
    assert batch["event_time"] == [_at(10), _at(20), _at(30)]
    assert batch["watermark"] == [_at(5_000)] * 3
    assert batch["kind"] == ["event"] * 3
    assert batch["segment"] == ["s/t/0", "s/t/0", "s/t/1"]
    assert batch["offset"] == [0, next(iter_frames(first)).end, 64]
    assert batch["ingestion_time"] == [_at(1_000), _at(1_000), _at(2_000)]


def test_an_event_without_its_timestamp_field_is_named() -> None:
    rows = _rows("json", timeDomain="IngestionTime", timestampField="ts")

    with pytest.raises(InvalidArgumentError, match="has no timestamp field 'ts'"):
        rows.add("s/t/0", encode_frames([b'{"other": 1}'], 1_000, None), 0)


def test_text_that_is_not_utf8_names_the_event() -> None:
    rows = _rows("string")
    data = encode_frames([b"fine", b"\xff\xfe"], 1_000, None)
    rows.add("s/t/3", data, 128)
    bad_offset = list(iter_frames(data, 128))[1].offset

    with pytest.raises(
        InvalidArgumentError, match=f"offset {bad_offset} of segment s/t/3 is not UTF-8"
    ):
        rows.flush(_arrow_schema(tidemark_schema("string")))


def test_bytes_are_kept_as_they_are() -> None:
    rows = _rows("bytes")
    rows.add("s/t/0", encode_frames([b"\xff\xfe", b""], 1_000, None), 0)

    batch = rows.flush(_arrow_schema(tidemark_schema("bytes"))).to_pydict()

    assert batch["event"] == [b"\xff\xfe", b""]
    assert batch["event_time"] == [_at(1_000)] * 2  # processing time: the ingestion time
