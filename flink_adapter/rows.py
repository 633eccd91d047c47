"""The rows of the Tidemark Flink source, declared once.

Every shape the source's rows take comes from the column declarations here:

- a reader's row (:func:`batch_row_type`): a batch of one segment's events
  (:data:`BATCHED` columns each) in an array, or one epoch end's watermark;
  PyFlink's cost is per row a Python function hands to the JVM, and the JVM
  unnests the array;
- the unnesting query and the table schema whose watermark follows ``wm``
  (:func:`unnest_query`, :func:`table_schema`);
- the source's rows (:data:`OUTPUT_FIELDS`, :func:`output_type`), the event
  time also as ``rt``, a ``TIMESTAMP_LTZ(3)`` rowtime attribute (an Instant
  in a DataStream).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyflink.common import Types
from pyflink.table import DataTypes, Schema

__all__ = [
    "BATCHED",
    "KIND_EVENTS",
    "KIND_WATERMARK",
    "LATE_INDEX",
    "OUTPUT",
    "OUTPUT_FIELDS",
    "Column",
    "batch_row_type",
    "flink_millis",
    "output_type",
    "table_schema",
    "unnest_query",
]

#: ``kind`` of a reader row holding a batch of events.
KIND_EVENTS = "events"
#: Flink's latest TIMESTAMP_LTZ(3), 9999-12-31T23:59:59.999Z, in epoch ms.
FLINK_LATEST_MS = 253_402_300_799_999


def flink_millis(watermark: int) -> int:
    """A watermark (epoch ms) as the ``wm`` column carries it: the end of time as Flink's latest.

    The core's END_OF_TIME (nothing left to read: every segment sealed and
    read) does not fit a TIMESTAMP_LTZ, and the watermark assigner would
    take the overflow for no watermark; Flink's latest time fires every
    timer all the same.
    """
    return min(watermark, FLINK_LATEST_MS)


#: ``kind`` of a reader row holding an epoch end's watermark (``wm``), and no events.
KIND_WATERMARK = "wm"


@dataclass(frozen=True)
class Column:
    """One column: its name, its kind of value, and the SQL that computes it when unnesting.

    ``kind`` is ``string``, ``long``, ``boolean``, ``event`` (bytes for the
    bytes schema, else text) or ``rowtime``. ``sql`` computes the column from
    the reader row ``t`` and its event ``e``; a watermark row has no event,
    so event time falls back to its ``wm``.
    """

    name: str
    kind: str
    sql: str

    def type_info(self, deserializer: str) -> Any:
        """The column's Flink type (DataStream rows)."""
        if self.kind == "event":
            return (
                Types.PRIMITIVE_ARRAY(Types.BYTE()) if deserializer == "bytes" else Types.STRING()
            )
        return _TYPE_INFO[self.kind]()

    def data_type(self, deserializer: str) -> Any:
        """The column's Table type."""
        if self.kind == "event" and deserializer == "bytes":
            return DataTypes.BYTES()
        return _DATA_TYPE["string" if self.kind == "event" else self.kind]()


_TYPE_INFO: dict[str, Callable[[], Any]] = {
    "string": Types.STRING,
    "long": Types.LONG,
    "boolean": Types.BOOLEAN,
    "rowtime": Types.INSTANT,
}
_DATA_TYPE: dict[str, Callable[[], Any]] = {
    "string": DataTypes.STRING,
    "long": DataTypes.BIGINT,
    "boolean": DataTypes.BOOLEAN,
    "rowtime": lambda: DataTypes.TIMESTAMP_LTZ(3),
}
_EVENT_TIME_SQL = "COALESCE(e.event_time, t.wm)"

ROUTING_KEY = Column("routing_key", "string", "e.routing_key")
EVENT = Column("event", "event", "e.event")
EVENT_TIME = Column("event_time", "long", _EVENT_TIME_SQL)
LATE = Column("late", "boolean", "e.late")
SEGMENT = Column("segment", "string", "t.segment")
OFFSET = Column("offset", "long", "e.`offset`")
INGESTION_TIME = Column("ingestion_time", "long", "e.ingestion_time")
ROWTIME = Column("rt", "rowtime", f"TO_TIMESTAMP_LTZ({_EVENT_TIME_SQL}, 3)")

#: The columns of one event in a reader row's batch, in order.
BATCHED = (ROUTING_KEY, EVENT, EVENT_TIME, LATE, OFFSET, INGESTION_TIME)
#: The columns of the source's rows, in order.
OUTPUT = (ROUTING_KEY, EVENT, EVENT_TIME, LATE, SEGMENT, OFFSET, INGESTION_TIME, ROWTIME)
#: The names of :data:`OUTPUT`.
OUTPUT_FIELDS = tuple(column.name for column in OUTPUT)
#: Where a row says whether its event is late.
LATE_INDEX = OUTPUT_FIELDS.index(LATE.name)
#: A reader row: kind, the watermark of a watermark row, the batch's segment, its events.
_READER_FIELDS = ("kind", "wm", "segment", "events")


def batch_row_type(deserializer: str) -> Any:
    """The Flink type of a reader's rows (:data:`BATCHED` events in an array)."""
    event = Types.ROW_NAMED([c.name for c in BATCHED], [c.type_info(deserializer) for c in BATCHED])
    return Types.ROW_NAMED(
        list(_READER_FIELDS),
        [Types.STRING(), Types.LONG(), Types.STRING(), Types.OBJECT_ARRAY(event)],
    )


def output_type(deserializer: str) -> Any:
    """The Flink type of the source's rows (:data:`OUTPUT`)."""
    return Types.ROW_NAMED(list(OUTPUT_FIELDS), [c.type_info(deserializer) for c in OUTPUT])


def unnest_query(view: str) -> str:
    """The query that unnests the reader rows of ``view``: ``kind``, ``wm``, then :data:`OUTPUT`.

    A watermark row has no events: the LEFT JOIN keeps it, its event time its watermark.
    """
    columns = ", ".join(f"{c.sql} AS `{c.name}`" for c in OUTPUT)
    fields = ", ".join(f"`{c.name}`" for c in BATCHED)
    return (
        f"SELECT t.kind, t.wm, {columns} "
        f"FROM {view} AS t LEFT JOIN UNNEST(t.events) AS e({fields}) ON TRUE"
    )


def table_schema(deserializer: str) -> Any:
    """The schema of :func:`unnest_query`'s rows, with the watermark following ``wm`` on ``rt``."""
    builder = Schema.new_builder()
    builder.column("kind", DataTypes.STRING()).column("wm", DataTypes.BIGINT())
    for column in OUTPUT:
        builder.column(column.name, column.data_type(deserializer))
    return builder.watermark(ROWTIME.name, "TO_TIMESTAMP_LTZ(wm, 3)").build()
