"""Time in the core, in epoch milliseconds: timestamp assigners, durations, the end of time.

The assigners' protocol matches Flink's ``TimestampAssigner.extract_timestamp(value,
record_timestamp)``; here the record timestamp is the event's ingestion time.
:func:`to_millis` takes a duration given as a timedelta or a number of ms.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from connector.errors import InvalidArgumentError

__all__ = [
    "END_OF_TIME",
    "CallableTimestampAssigner",
    "FieldTimestampAssigner",
    "IngestionTimeAssigner",
    "TimestampAssigner",
    "assigner_from_path",
    "to_millis",
]

#: The watermark of a group with no unfinished segment: nothing more will come.
END_OF_TIME = 2**63 - 1

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


@runtime_checkable
class TimestampAssigner(Protocol[T_contra]):
    """Gives an event its event time."""

    def extract_timestamp(self, event: T_contra, ingestion_time_ms: int) -> int:
        """The event time of ``event`` in epoch ms."""
        ...


class IngestionTimeAssigner:
    """Event time is ingestion time."""

    def extract_timestamp(self, event: object, ingestion_time_ms: int) -> int:
        """Returns ``ingestion_time_ms``."""
        return ingestion_time_ms

    def __eq__(self, other: object) -> bool:
        return type(other) is IngestionTimeAssigner

    def __hash__(self) -> int:
        return hash(IngestionTimeAssigner)

    def __repr__(self) -> str:
        return "IngestionTimeAssigner()"


def to_millis(name: str, value: int | float | timedelta) -> int:
    """Milliseconds of a timedelta or a number of ms; raises naming ``name`` when negative."""
    millis = value // timedelta(milliseconds=1) if isinstance(value, timedelta) else value
    if isinstance(millis, bool) or not isinstance(millis, (int, float)) or millis < 0:
        msg = f"{name} must be a timedelta or milliseconds >= 0, got {value!r}"
        raise InvalidArgumentError(msg)
    return int(millis)


def _as_millis(value: Any, source: str) -> int:
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        return value
    elif isinstance(value, float):
        return int(value)
    elif isinstance(value, datetime):
        if value.tzinfo is None:
            msg = f"{source} is a naive datetime {value!r}: give it a timezone"
            raise InvalidArgumentError(msg)
        return int(value.timestamp() * 1000)
    elif isinstance(value, str):
        try:
            return _as_millis(datetime.fromisoformat(value), source)
        except ValueError:
            pass
    msg = f"{source} is {value!r}: expected epoch ms, an aware datetime or an ISO 8601 string"
    raise InvalidArgumentError(msg)


class FieldTimestampAssigner:
    """Event time from a field of a mapping event (JSON), in epoch ms or ISO 8601."""

    def __init__(self, field: str):
        if not field:
            msg = f"timestamp field must be a non-empty name, got {field!r}"
            raise InvalidArgumentError(msg)
        self.field = field

    def extract_timestamp(self, event: Any, ingestion_time_ms: int) -> int:
        """``event[field]`` as epoch ms; raises naming the field when absent or malformed."""
        try:
            value = event[self.field]
        except (KeyError, TypeError, IndexError):
            msg = f"event {event!r:.120} has no timestamp field {self.field!r}"
            raise InvalidArgumentError(msg) from None
        return _as_millis(value, f"timestamp field {self.field!r}")

    def __eq__(self, other: object) -> bool:
        return type(other) is FieldTimestampAssigner and other.field == self.field

    def __hash__(self) -> int:
        return hash((FieldTimestampAssigner, self.field))

    def __repr__(self) -> str:
        return f"FieldTimestampAssigner({self.field!r})"


class CallableTimestampAssigner(Generic[T]):
    """Event time from a function of the event (and, if it takes two, the ingestion time)."""

    def __init__(self, function: Callable[..., Any], takes_ingestion_time: bool = False):
        if not callable(function):
            msg = f"timestamp function must be callable, got {function!r}"
            raise InvalidArgumentError(msg)
        self.function = function
        self.takes_ingestion_time = takes_ingestion_time

    def extract_timestamp(self, event: T, ingestion_time_ms: int) -> int:
        """The function's result as epoch ms."""
        args = (event, ingestion_time_ms) if self.takes_ingestion_time else (event,)
        return _as_millis(self.function(*args), f"{self.function!r}'s result")

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is CallableTimestampAssigner
            and other.function == self.function
            and other.takes_ingestion_time == self.takes_ingestion_time
        )

    def __hash__(self) -> int:
        return hash((CallableTimestampAssigner, self.function, self.takes_ingestion_time))

    def __repr__(self) -> str:
        return f"CallableTimestampAssigner({self.function!r})"


def assigner_from_path(path: str) -> TimestampAssigner[Any]:
    """The assigner named ``module:attribute``: a TimestampAssigner or a function of the event."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        msg = f"timestamp assigner {path!r} must look like 'module:function'"
        raise InvalidArgumentError(msg)
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        msg = f"cannot load timestamp assigner {path!r}: {error}"
        raise InvalidArgumentError(msg) from None
    if isinstance(target, TimestampAssigner):
        return target
    return CallableTimestampAssigner(target)
