"""The columns of a ``tidemark`` read.

One row per event, and in a time domain with watermarks one row per
micro-batch that reads events or whose watermark rose, even when the batch
has no event (``kind`` = ``watermark``), so Spark's watermark keeps moving
on quiet streams. The ``watermark`` column's metadata names the read's time domain,
so the event-time helpers can refuse a read that has no watermarks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connector.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from connector.reader.source import TimeKeeping

__all__ = [
    "EVENT",
    "EVENT_TIME",
    "INGESTION_TIME",
    "KIND",
    "KIND_EVENT",
    "KIND_WATERMARK",
    "LATE",
    "OFFSET",
    "ROUTING_KEY",
    "SEGMENT",
    "WATERMARK",
    "require_columns",
    "tidemark_schema",
]

ROUTING_KEY = "routing_key"
EVENT = "event"
EVENT_TIME = "event_time"
WATERMARK = "watermark"
KIND = "kind"
SEGMENT = "segment"
OFFSET = "offset"
INGESTION_TIME = "ingestion_time"
LATE = "late"

#: ``kind`` of a row carrying an event (and the watermark as of its batch's end).
KIND_EVENT = "event"
#: ``kind`` of a row carrying only the watermark; its event columns are null.
KIND_WATERMARK = "watermark"

#: Metadata of the ``watermark`` column: the read's ``timeDomain``, and whether it has watermarks.
TIME_DOMAIN_KEY = "tidemark.timeDomain"
HAS_WATERMARKS_KEY = "tidemark.hasWatermarks"


def tidemark_schema(deserializer: str = "string", time: TimeKeeping | None = None) -> StructType:
    """The schema of a read with ``deserializer`` ``bytes``, ``string`` or ``json``.

    Columns, in order:

    - ``routing_key`` (string): the event's routing key, when known.
    - ``event`` (string for ``string`` and ``json``, binary for ``bytes``).
    - ``event_time`` (timestamp): from the timestamp field or assigner, else
      the ingestion time.
    - ``watermark`` (timestamp): the group watermark minus ``maxEventTimeLag``
      as of the end of the row's micro-batch; null in the processing-time domain.
    - ``kind`` (string, never null): ``event`` or ``watermark``.
    - ``segment`` (string), ``offset`` (long): where the event is stored.
    - ``ingestion_time`` (timestamp): when the store took the event.
    - ``late`` (boolean): whether ``event_time`` is at or below the watermark
      in force when the event was read (the one its micro-batch runs with:
      the ``watermark`` of the batch before); false in the processing-time
      domain, null on ``watermark`` rows.

    With ``time`` (the read's time keeping), ``watermark`` carries metadata
    naming its time domain and whether it has watermarks.

    Raises:
        InvalidArgumentError: for an unknown deserializer.
    """
    event_type: DataType
    if deserializer == "bytes":
        event_type = BinaryType()
    elif deserializer in ("string", "json"):
        event_type = StringType()
    else:
        msg = f"unknown deserializer {deserializer!r}: use 'bytes', 'string' or 'json'"
        raise InvalidArgumentError(msg)
    return StructType(
        [
            StructField(ROUTING_KEY, StringType(), True),
            StructField(EVENT, event_type, True),
            StructField(EVENT_TIME, TimestampType(), True),
            StructField(WATERMARK, TimestampType(), True, _time_metadata(time)),
            StructField(KIND, StringType(), False),
            StructField(SEGMENT, StringType(), True),
            StructField(OFFSET, LongType(), True),
            StructField(INGESTION_TIME, TimestampType(), True),
            StructField(LATE, BooleanType(), True),
        ]
    )


def _time_metadata(time: TimeKeeping | None) -> dict[str, object]:
    if time is None:
        return {}
    return {TIME_DOMAIN_KEY: time.domain.value, HAS_WATERMARKS_KEY: time.has_watermarks}


def require_columns(df: DataFrame, *columns: str) -> None:
    """Raises InvalidArgumentError naming the first of ``columns`` that ``df`` lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        msg = f"the DataFrame has no column {missing[0]!r}; it has {df.columns!r}"
        raise InvalidArgumentError(msg)
