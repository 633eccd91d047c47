"""What a reader subtask hands the JVM: a task's events as batch rows.

The events come from the reader core's one read path
(:func:`~connector.reader.source.read_columns`: event time and lateness
included); here they become rows of :func:`flink_adapter.rows.batch_row_type`.
Plain Python over the store client, so it is tested without Flink.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyflink.common import Row

from connector.reader.source import EventColumns, text_of
from flink_adapter.rows import KIND_EVENTS

__all__ = ["BYTES_PER_BATCH", "EVENTS_PER_BATCH", "batch_rows"]

#: The most events, and payload bytes, in one batch (a larger event is a batch of its own).
#: A reader emits a batch as one Flink row, which the JVM unnests: fewer rows cost PyFlink
#: less, but without object reuse Flink copies each unnested row, its batch included, once
#: per event, so the copying grows with the square of a batch's size. With events of 100
#: bytes, batches of 32 gave 60,000 events/s; of 10, 50,000; of 100, 43,000.
EVENTS_PER_BATCH = 32
BYTES_PER_BATCH = 4096


def batch_rows(
    columns: EventColumns,
    as_text: bool,
    max_events: int = EVENTS_PER_BATCH,
    max_bytes: int = BYTES_PER_BATCH,
) -> Iterator[Row]:
    """``columns``' events in order, as rows of batches of at most ``max_events`` and ``max_bytes``.

    Each batch holds at least one event. ``as_text``: each event as its UTF-8
    text (string and JSON schemas) rather than its bytes; a JSON event is
    never parsed here.
    """
    segment = columns.segment
    payloads = columns.payloads
    count = len(columns)
    late = columns.late
    first = 0
    while first < count:
        stop, size = first + 1, len(payloads[first])
        while (
            stop < count and stop - first < max_events and size + len(payloads[stop]) <= max_bytes
        ):
            size += len(payloads[stop])
            stop += 1
        events = [
            Row(
                columns.routing_keys[i],
                text_of(payloads[i], segment, columns.offsets[i]) if as_text else payloads[i],
                columns.event_times[i],
                late[i],
                columns.offsets[i],
                columns.ingestion_times[i],
            )
            for i in range(first, stop)
        ]
        yield Row(KIND_EVENTS, None, segment, events)
        first = stop
