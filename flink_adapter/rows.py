"""The rows of the Tidemark Flink source, declared once.

Every shape the source's rows take comes from the column declarations here:

- a reader's row (:func:`batch_row_type`): a batch of one segment's events
  as columns, an array per :data:`BATCHED` column, or one epoch end's
  watermark (``wm``, NULL in a batch); PyFlink's cost is per row a Python
  function hands to the JVM, and the JVM unnests the arrays (by ordinal:
  ``UNNEST ... WITH ORDINALITY``);
- the unnesting query, the table schema whose watermark follows ``wm``, and
  the query that drops the watermark rows (:func:`unnest_query`,
  :func:`table_schema`, :func:`events_query`);
- the source's rows (:data:`OUTPUT_FIELDS`, :func:`output_type`), the event
  time also as ``rt``, a ``TIMESTAMP_LTZ(3)`` rowtime attribute (an Instant
  in a DataStream), then any declared JSON fields and ``malformed``
  (:mod:`flink_adapter.json_fields`, :func:`output_fields`).

Why arrays of values and not an array of rows: in thread mode PyFlink 2.3
turns an array of rows into JVM rows through one reused row object, so
every element of the array came out as its last (found by a restored job
whose every event read as the last of its batch); arrays of strings,
numbers and byte arrays hold no reused object, and cost less to hand over
in both modes.

What the unnesting costs, and why the rows are shaped as they are: without
object reuse Flink copies a record between chained operators, and the
unnesting join emits each event together with its whole batch row, so the
batch is copied once per event (measured with Java Flight Recorder: the
largest share of the JVM's time). So a batch row carries no more than it
must: no column saying what kind of row it is (a watermark row is the one
with a ``wm``), and an empty ``late`` array in a batch with no late event
(almost every batch). Strings arrive as Flink's binary arrays, which copy
as a block (events as bytes would not: an array of byte arrays is copied
array by array, and Flink's cast of bytes to a string decodes them into a
Java string and encodes them again); numbers as arrays of boxed values,
copied value by value (a cast to arrays of non-null numbers copied them
once more and still left them boxed), so a batch leaves out the number
arrays it can: the ingestion times when its events share one (events of
one append do), the event times when they are the ingestion times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyflink.common import Types
from pyflink.table import DataTypes, Schema

from flink_adapter import json_fields
from flink_adapter.json_fields import MALFORMED, JsonFields

__all__ = [
    "BATCHED",
    "BATCH_ROW_FIELDS",
    "LATE_INDEX",
    "ROWTIME_INDEX",
    "OUTPUT",
    "OUTPUT_FIELDS",
    "Column",
    "batch_row_type",
    "events_query",
    "flink_millis",
    "output_fields",
    "output_type",
    "table_schema",
    "unnest_query",
]

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


@dataclass(frozen=True)
class Column:
    """One column: its name, its kind of value, and the SQL that computes it when unnesting.

    ``kind`` is ``string``, ``long``, ``boolean``, ``event`` (bytes for the
    bytes schema, else text) or ``rowtime``. ``sql`` computes the column from
    the reader row ``t`` and the ordinal ``i`` of its event in the row's
    arrays; a watermark row has no event (``i`` is NULL), so event time
    falls back to its ``wm``.
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

    def array_type_info(self, deserializer: str) -> Any:
        """The Flink type of the column's array in a reader row."""
        element = self.type_info(deserializer)
        if self.kind == "event" and deserializer == "bytes":
            return Types.OBJECT_ARRAY(element)
        return Types.BASIC_ARRAY(element)

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
#: A batch whose events all share an ingestion time carries it once (``ingested``) and an
#: empty ``ingestion_time`` array; a batch whose event times are its ingestion times (always
#: so in the processing-time and ingestion-time domains) an empty ``event_time`` array. An
#: index past an array's end reads NULL. A watermark row's event time is its ``wm``.
_INGESTION_TIME_SQL = "COALESCE(t.ingestion_time[i], t.ingested)"
_EVENT_TIME_SQL = "COALESCE(t.event_time[i], t.ingestion_time[i], t.ingested, t.wm)"

ROUTING_KEY = Column("routing_key", "string", "t.routing_key[i]")
EVENT = Column("event", "event", "t.event[i]")
EVENT_TIME = Column("event_time", "long", _EVENT_TIME_SQL)
#: A batch without late events carries an empty ``late`` array (an index past its end reads
#: NULL). The column stays nullable (a CASE, not COALESCE): a NOT NULL one would cost a
#: not-null check on every row.
LATE = Column("late", "boolean", "CASE WHEN t.late[i] IS NULL THEN FALSE ELSE t.late[i] END")
SEGMENT = Column("segment", "string", "t.segment")
OFFSET = Column("offset", "long", "t.`offset`[i]")
INGESTION_TIME = Column("ingestion_time", "long", _INGESTION_TIME_SQL)
ROWTIME = Column("rt", "rowtime", f"TO_TIMESTAMP_LTZ({_EVENT_TIME_SQL}, 3)")

#: The columns of a reader row's batch, an array each, in order.
BATCHED = (ROUTING_KEY, EVENT, EVENT_TIME, LATE, OFFSET, INGESTION_TIME)
#: The columns of the source's rows, in order.
OUTPUT = (ROUTING_KEY, EVENT, EVENT_TIME, LATE, SEGMENT, OFFSET, INGESTION_TIME, ROWTIME)
#: The names of :data:`OUTPUT`.
OUTPUT_FIELDS = tuple(column.name for column in OUTPUT)
#: Where a row says whether its event is late.
LATE_INDEX = OUTPUT_FIELDS.index(LATE.name)
#: Where a row holds its event time as a rowtime value (the last column).
ROWTIME_INDEX = OUTPUT_FIELDS.index(ROWTIME.name)
#: The fields of a reader row: the watermark of a watermark row (NULL in a batch of events),
#: the batch's segment, the ingestion time its events share (or NULL), then its
#: :data:`BATCHED` arrays.
BATCH_ROW_FIELDS = ("wm", "segment", "ingested", *(c.name for c in BATCHED))


def batch_row_type(deserializer: str) -> Any:
    """The Flink type of a reader's rows (:data:`BATCH_ROW_FIELDS`)."""
    arrays = (c.array_type_info(deserializer) for c in BATCHED)
    return Types.ROW_NAMED(
        list(BATCH_ROW_FIELDS), [Types.LONG(), Types.STRING(), Types.LONG(), *arrays]
    )


def output_fields(fields: JsonFields = ()) -> tuple[str, ...]:
    """The names of the source's columns: :data:`OUTPUT`, then any declared JSON fields.

    With declared ``fields`` (:mod:`flink_adapter.json_fields`), each of them
    after ``rt``, then ``malformed``.
    """
    if not fields:
        return OUTPUT_FIELDS
    return (*OUTPUT_FIELDS, *(name for name, _ in fields), MALFORMED)


def output_type(deserializer: str, fields: JsonFields = ()) -> Any:
    """The Flink type of the source's rows (:func:`output_fields`)."""
    types = [c.type_info(deserializer) for c in OUTPUT]
    if fields:
        types += [*(json_fields.type_info(t) for _, t in fields), Types.BOOLEAN()]
    return Types.ROW_NAMED(list(output_fields(fields)), types)


def unnest_query(view: str, fields: JsonFields = ()) -> str:
    """The query that unnests the reader rows of ``view``: ``wm``, then the columns.

    The columns of :func:`output_fields`. One row per ordinal ``i`` of the
    batch's event array; a watermark row has no events: the LEFT JOIN keeps
    it, its event time its watermark. Declared JSON fields are computed
    here, in the JVM.
    """
    columns = [f"{c.sql} AS `{c.name}`" for c in OUTPUT]
    if fields:
        columns += [f"{json_fields.field_sql(EVENT.sql, n, t)} AS `{n}`" for n, t in fields]
        columns.append(f"{json_fields.malformed_sql(EVENT.sql, fields)} AS `{MALFORMED}`")
    return (
        f"SELECT t.wm, {', '.join(columns)} FROM {view} AS t "
        f"LEFT JOIN UNNEST(t.{EVENT.name}) WITH ORDINALITY AS e(x, i) ON TRUE"
    )


def events_query(view: str, fields: JsonFields = ()) -> str:
    """The query of the source's rows (:func:`output_fields`): ``view`` less watermark rows."""
    columns = ", ".join(f"`{name}`" for name in output_fields(fields))
    return f"SELECT {columns} FROM {view} WHERE wm IS NULL"


def table_schema(deserializer: str, fields: JsonFields = ()) -> Any:
    """The schema of :func:`unnest_query`'s rows, with the watermark following ``wm`` on ``rt``."""
    builder = Schema.new_builder().column("wm", DataTypes.BIGINT())
    for column in OUTPUT:
        builder.column(column.name, column.data_type(deserializer))
    for name, sql_type in fields:
        builder.column(name, json_fields.data_type(sql_type))
    if fields:
        builder.column(MALFORMED, DataTypes.BOOLEAN())
    return builder.watermark(ROWTIME.name, "TO_TIMESTAMP_LTZ(wm, 3)").build()
