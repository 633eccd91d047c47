"""Each key's events in event-time order, late ones reported.

The twin of the Pravega connector's EventTimeOrderingFunction.

Use it on a keyed stream of the source's rows, in the ingestion-time domain::

    ordered = readings.key_by(lambda row: row[0]).process(
        EventTimeOrderingFunction(), output_type=reader.output_type()
    )
    late = ordered.get_side_output(LATE_EVENTS)

An event is buffered until Flink's watermark passes its timestamp, then
emitted, so each key's events come out in timestamp order (ties in arrival
order). An event the source flagged late, or one whose timestamp is at or
below the watermark already in force, goes to the late side output as the
source's row, typed (:func:`late_events`), so Java sinks take it: reported,
never dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import OutputTag
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor

from connector.errors import InvalidArgumentError
from connector.reader.source import is_late
from flink_adapter.json_fields import JsonFields
from flink_adapter.python_mode import THREAD, mode_of
from flink_adapter.rows import LATE_INDEX, ROWTIME_INDEX, output_fields, output_type

__all__ = ["LATE_EVENTS", "EventTimeOrderingFunction", "late_events"]


@cache
def late_events(deserializer: str = "json", fields: JsonFields = ()) -> OutputTag:
    """The late side output of rows of a source with ``deserializer`` (their Flink type).

    ``json`` and ``string`` sources share one (events as text); ``bytes`` has
    its own; a source with declared JSON ``fields`` one per declaration.
    """
    text = "bytes" if deserializer == "bytes" else "text"
    declared = "".join(f"-{name}:{sql_type}" for name, sql_type in fields)
    tag = OutputTag(f"tidemark-late-events-{text}{declared}", output_type(deserializer, fields))
    _LATE_TAGS[tag.tag_id] = (deserializer, fields)
    return tag


#: What each late side output was made of, by its id (to make it again on a worker).
_LATE_TAGS: dict[str, tuple[str, JsonFields]] = {}


#: The late side output of a source whose events are text (``json``, ``string``).
LATE_EVENTS = late_events("json")


class EventTimeOrderingFunction(KeyedProcessFunction):
    """Buffers each key's events by timestamp and emits them on event-time timers.

    ``late``: the side output late rows go to (:func:`late_events` of the
    source's deserializer; :data:`LATE_EVENTS`, for text events, by default).
    """

    def __init__(self, late: OutputTag = LATE_EVENTS):
        # Only plain values travel with the function: PyFlink's types keep JVM handles once used.
        self._late_output = _late_tag(late.tag_id)
        self._fields = list(output_fields(self._late_output[1]))

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        self._buffer = runtime_context.get_map_state(
            MapStateDescriptor("tidemark-ordering", Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )
        self._late = runtime_context.get_metrics_group().add_group("tidemark").counter("lateEvents")
        self._rowtime = _java_instant if mode_of(runtime_context) == THREAD else _python_instant

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:  # noqa: D102
        timestamp = ctx.timestamp()
        if value[LATE_INDEX] or is_late(timestamp, ctx.timer_service().current_watermark()):
            self._late.inc()
            yield late_events(*self._late_output), value
            return
        waiting = self._buffer.get(timestamp) or []
        # Buffered without the rowtime column: in thread mode it is a JVM object, not picklable.
        waiting.append((*value[:ROWTIME_INDEX], *value[ROWTIME_INDEX + 1 :]))
        self._buffer.put(timestamp, waiting)
        ctx.timer_service().register_event_time_timer(timestamp)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Any]:  # noqa: D102
        rowtime = self._rowtime(timestamp)
        for fields in self._buffer.get(timestamp) or []:
            # A whole row, as earlier versions kept.
            row = Row(*fields[:ROWTIME_INDEX], rowtime, *fields[ROWTIME_INDEX:])
            row.set_field_names(self._fields)
            yield row
        self._buffer.remove(timestamp)


def _late_tag(tag_id: str) -> tuple[str, JsonFields]:
    """What the side output :func:`late_events` made with id ``tag_id`` was made of."""
    if tag_id in _LATE_TAGS:
        return _LATE_TAGS[tag_id]
    msg = f"late: expected an OutputTag of flink_adapter.late_events(), got {tag_id!r}"
    raise InvalidArgumentError(msg)


def _java_instant(epoch_ms: int) -> Any:
    """The rowtime value of a row in thread mode: a ``java.time.Instant``."""
    from pemja import findClass

    return findClass("java.time.Instant").ofEpochMilli(epoch_ms)


def _python_instant(epoch_ms: int) -> Any:
    """The rowtime value of a row in process mode: PyFlink's ``Instant``."""
    from pyflink.common.time import Instant

    return Instant.of_epoch_milli(epoch_ms)
