"""Typed columns from a JSON event's fields, parsed by Spark in the JVM.

:func:`with_json_fields` adds one column per declared field and
``malformed``, with the meaning of the Flink builder's ``with_json_fields``
(:mod:`flink_adapter.json_fields`): an event that does not match the
declaration (not a JSON object, a field missing, JSON ``null``, or a value
that does not convert to its type) is kept, with ``malformed`` true and
the fields that do not match null; its text stays in ``event``.

Why a function and not a read option: a Python data source cannot add a
projection to the plan Spark builds from it (PySpark 4.3: its ``schema()``
and readers yield rows, nothing more), so parsing there would parse in
Python, in the source's tasks. Here Spark's own ``from_json`` reads each
event once, every field as its JSON text, and ``try_cast`` converts each
text to its type: a number, or a string holding one, converts, as in
Flink's JSON row format (``from_json`` with the declared types would take
``"12"`` as no INT at all).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from connector.errors import InvalidArgumentError
from spark_adapter.schema import EVENT, require_columns

__all__ = ["MALFORMED", "with_json_fields"]

#: The column that says an event does not match the declared fields.
MALFORMED = "malformed"
_TEXTS = "__tidemark_json_texts"


def with_json_fields(df: DataFrame, fields: str | StructType) -> DataFrame:
    """``df`` with one typed column per field of its JSON ``event``, then ``malformed``.

    ``fields`` declares them as ``from_json`` takes a schema: a DDL string
    (``"sensor STRING, temp DOUBLE, tags ARRAY<STRING>"``) or a
    ``StructType``. Each field's value is its JSON value converted to the
    declared type: a ``STRING`` field takes the text of any value (a
    string's without its quotes); an array, map or struct field is read
    from its JSON by ``from_json``; any other type is ``try_cast`` from the
    value's text, so ``12`` and ``"12"`` are both an ``INT`` 12, and ``12.5``
    is none. ``malformed`` is true when any declared field is null (see the
    module docstring), false when all match, null on ``watermark`` rows
    (no event). No row is dropped; no Python runs per event.

    Apply it after :func:`~spark_adapter.watermark.event_time` (a filter on
    ``malformed`` before that call would remove the watermark rows).

    Raises:
        InvalidArgumentError: naming the declaration: not fields, a field named
            like a column ``df`` has or ``malformed``, twice the same name; or an
            ``event`` column that is not text (a read with deserializer ``bytes``).
    """
    require_columns(df, EVENT)
    if not isinstance(df.schema[EVENT].dataType, StringType):
        msg = (
            f"with_json_fields reads JSON text, and column {EVENT!r} is "
            f"{df.schema[EVENT].dataType.simpleString()}: read with option 'deserializer' "
            "'json' or 'string', not 'bytes'"
        )
        raise InvalidArgumentError(msg)
    declared = _declared(fields, df.columns)
    as_text = StructType([StructField(f.name, StringType()) for f in declared.fields])
    staged = df.withColumn(_TEXTS, F.from_json(F.col(EVENT), as_text))
    values = {f.name: _typed(F.col(_TEXTS).getField(f.name), f.dataType) for f in declared.fields}
    typed = staged.withColumns(values).drop(_TEXTS)
    every = F.lit(True)
    for name in values:
        every = every & F.col("`" + name.replace("`", "``") + "`").isNotNull()
    malformed = F.when(F.col(EVENT).isNotNull(), ~F.coalesce(every, F.lit(False)))
    return typed.withColumn(MALFORMED, malformed)


def _typed(text: Column, kind: DataType) -> Column:
    if isinstance(kind, StringType):
        return text
    if isinstance(kind, ArrayType | MapType | StructType):
        return F.from_json(text, kind)
    return text.try_cast(kind)


def _declared(fields: str | StructType, taken: list[str]) -> StructType:
    """``fields`` as a StructType, checked against the columns ``taken``."""
    declared: DataType | None = fields if isinstance(fields, StructType) else None
    if isinstance(fields, str) and fields.strip():
        try:
            declared = DataType.fromDDL(fields)
        except Exception as error:  # noqa: BLE001 - Spark's parser raises its own kinds
            first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            msg = f"with_json_fields: {fields!r} is not a list of fields such as "
            msg += f"'sensor STRING, temp DOUBLE' ({first})"
            raise InvalidArgumentError(msg) from None
    if not isinstance(declared, StructType) or not declared.fields:
        msg = (
            "with_json_fields: expected fields as a DDL string such as "
            f"'sensor STRING, temp DOUBLE' or a StructType, got {fields!r}"
        )
        raise InvalidArgumentError(msg)
    seen = {name.lower() for name in [*taken, MALFORMED]}
    for field in declared.fields:
        if field.name.lower() in seen:
            msg = (
                f"with_json_fields: field {field.name!r} is named like a column the rows have "
                f"already ({[*taken, MALFORMED]!r}) or another field"
            )
            raise InvalidArgumentError(msg)
        seen.add(field.name.lower())
    return declared
