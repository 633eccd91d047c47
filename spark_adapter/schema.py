"""The columns of a ``tidemark`` read.

One row per event, and in the ingestion-time domain one row per micro-batch
carrying the watermark even when the batch has no event (``kind`` =
``watermark``), so Spark's watermark keeps moving on quiet streams.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connector.errors import InvalidArgumentError

__all__ = [
    "EVENT",
    "EVENT_TIME",
    "INGESTION_TIME",
    "KIND",
    "KIND_EVENT",
    "KIND_WATERMARK",
    "OFFSET",
    "ROUTING_KEY",
    "SEGMENT",
    "WATERMARK",
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

#: ``kind`` of a row carrying an event (and the watermark as of its batch's end).
KIND_EVENT = "event"
#: ``kind`` of a row carrying only the watermark; its event columns are null.
KIND_WATERMARK = "watermark"


def tidemark_schema(deserializer: str = "string") -> StructType:
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
            StructField(WATERMARK, TimestampType(), True),
            StructField(KIND, StringType(), False),
            StructField(SEGMENT, StringType(), True),
            StructField(OFFSET, LongType(), True),
            StructField(INGESTION_TIME, TimestampType(), True),
        ]
    )
