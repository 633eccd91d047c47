"""Typed columns from a JSON event's fields, as Flink's JSON row format gives them.

A source with the JSON schema may declare fields (names and Flink types,
:meth:`~flink_adapter.FlinkTidemarkReaderBuilder.with_json_fields`); its
rows then carry one typed column per field after the source's own, and
``malformed``. The JVM computes them while unnesting the readers' batches
(SQL ``JSON_VALUE`` and ``TRY_CAST``), so no Python function parses JSON.

An event that does not match the declaration (not a JSON object, a field
missing, JSON ``null``, or a value that does not convert to its type) is
not dropped: its row comes out with ``malformed`` TRUE, the fields that do
not match NULL, and the event's text in ``event``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from pyflink.common import Types
from pyflink.table import DataTypes

from connector.errors import InvalidArgumentError

__all__ = [
    "MALFORMED",
    "OPTION",
    "JsonFields",
    "data_type",
    "declared_fields",
    "field_sql",
    "malformed_sql",
    "type_info",
]

#: The builder method that declares the fields, as errors name it.
OPTION = "with_json_fields"
#: The column that says an event does not match the declared fields.
MALFORMED = "malformed"
#: A declaration: each field's name with its SQL type name, in order.
JsonFields = tuple[tuple[str, str], ...]

#: The types a field may have: SQL name -> (DataStream type, Table type).
_TYPES: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "STRING": (Types.STRING, DataTypes.STRING),
    "BOOLEAN": (Types.BOOLEAN, DataTypes.BOOLEAN),
    "INT": (Types.INT, DataTypes.INT),
    "BIGINT": (Types.LONG, DataTypes.BIGINT),
    "FLOAT": (Types.FLOAT, DataTypes.FLOAT),
    "DOUBLE": (Types.DOUBLE, DataTypes.DOUBLE),
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def declared_fields(fields: Any, taken: Iterable[str]) -> JsonFields:
    """``fields`` (a mapping or pairs of name and type) checked; each type as its SQL name.

    A type is a PyFlink ``Types`` value (``Types.STRING()``, ``Types.INT()``,
    ``Types.LONG()``, ``Types.FLOAT()``, ``Types.DOUBLE()``, ``Types.BOOLEAN()``)
    or its SQL name (``"BIGINT"``...).

    Raises:
        InvalidArgumentError: naming :data:`OPTION` and the bad value: no
            fields, a name that is not an identifier or is one of ``taken``
            (the source's own columns) or repeated, a type not listed above.
    """
    pairs = list(fields.items()) if isinstance(fields, Mapping) else _pairs(fields)
    if not pairs:
        _refuse(f"expected at least one field, got {fields!r}")
    reserved = {*taken, MALFORMED}
    declared: list[tuple[str, str]] = []
    for name, kind in pairs:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            _refuse(f"expected a field name of letters, digits and '_', got {name!r}")
        if name in reserved or name in dict(declared):
            _refuse(f"field {name!r} is a column the rows have already")
        declared.append((name, _sql_type(name, kind)))
    return tuple(declared)


def type_info(sql_type: str) -> Any:
    """The DataStream type of a field of ``sql_type``."""
    return _TYPES[sql_type][0]()


def data_type(sql_type: str) -> Any:
    """The Table type of a field of ``sql_type``."""
    return _TYPES[sql_type][1]()


def field_sql(event: str, name: str, sql_type: str) -> str:
    """SQL for field ``name`` of the JSON text ``event`` as ``sql_type``; NULL if it does not fit.

    The field's scalar value as text, then ``TRY_CAST`` to the type: a
    number or a string of one converts, as in Flink's JSON row format.
    (``JSON_VALUE ... RETURNING DOUBLE`` of a string fails the job in Flink
    2.3, a ClassCastException, whatever ``ON ERROR`` says.)
    """
    text = f"JSON_VALUE({event}, '$.{name}' NULL ON EMPTY NULL ON ERROR)"
    return text if sql_type == "STRING" else f"TRY_CAST({text} AS {sql_type})"


def malformed_sql(event: str, fields: JsonFields) -> str:
    """SQL that is TRUE when ``event`` is not a JSON object holding every field, of its type."""
    present = " AND ".join(f"{field_sql(event, n, t)} IS NOT NULL" for n, t in fields)
    return f"NOT COALESCE({event} IS JSON OBJECT AND {present}, FALSE)"


def _pairs(fields: Any) -> list[tuple[Any, Any]]:
    try:
        pairs = [tuple(pair) for pair in fields]
    except TypeError:
        _refuse(f"expected a mapping of field names to Flink types, got {fields!r}")
    if any(len(pair) != 2 for pair in pairs):
        _refuse(f"expected pairs of a field name and a Flink type, got {fields!r}")
    return pairs  # type: ignore[return-value]


def _sql_type(name: str, kind: Any) -> str:
    if isinstance(kind, str) and kind.upper() in _TYPES:
        return kind.upper()
    for sql_type, (info, _) in _TYPES.items():
        try:
            if kind == info():
                return sql_type
        except Exception:  # noqa: BLE001, S112 - a value no type compares with
            continue
    _refuse(f"field {name!r}: expected one of {sorted(_TYPES)} (or its Types value), got {kind!r}")


def _refuse(problem: str) -> NoReturn:
    msg = f"{OPTION}: {problem}"
    raise InvalidArgumentError(msg)
