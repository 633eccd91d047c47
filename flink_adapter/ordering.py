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
below the watermark already in force, goes to :data:`LATE_EVENTS`: reported,
never dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyflink.common import Types
from pyflink.datastream import OutputTag
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor

from connector.reader.source import is_late
from flink_adapter.rows import LATE_INDEX

__all__ = ["LATE_EVENTS", "EventTimeOrderingFunction"]

#: The side output of late events (the source's rows, as Python values).
LATE_EVENTS = OutputTag("tidemark-late-events", Types.PICKLED_BYTE_ARRAY())


class EventTimeOrderingFunction(KeyedProcessFunction):
    """Buffers each key's events by timestamp and emits them on event-time timers."""

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: D102
        self._buffer = runtime_context.get_map_state(
            MapStateDescriptor("tidemark-ordering", Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )
        self._late = runtime_context.get_metrics_group().add_group("tidemark").counter("lateEvents")

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:  # noqa: D102
        timestamp = ctx.timestamp()
        if value[LATE_INDEX] or is_late(timestamp, ctx.timer_service().current_watermark()):
            self._late.inc()
            yield LATE_EVENTS, value
            return
        waiting = self._buffer.get(timestamp) or []
        waiting.append(value)
        self._buffer.put(timestamp, waiting)
        ctx.timer_service().register_event_time_timer(timestamp)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Any]:  # noqa: D102
        yield from self._buffer.get(timestamp) or []
        self._buffer.remove(timestamp)
