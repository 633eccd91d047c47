"""What a reader subtask hands the JVM: a task's events as batch rows of columns.

The events come from the reader core's one read path
(:func:`~connector.reader.source.read_columns`: event time and lateness
included); here they become rows of :func:`flink_adapter.rows.batch_row_type`,
each an array per column, sliced from the core's columns. Plain Python over
the store client, so it is tested without Flink.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyflink.common import Row

from connector.reader.source import EventColumns, text_of
from flink_adapter.rows import BATCHED, flink_millis

__all__ = ["BYTES_PER_BATCH", "EVENTS_PER_BATCH", "batch_rows", "watermark_row"]

#: The most events, and payload bytes, in one batch (a larger event is a batch of its own).
#: A reader emits a batch as one Flink row, which the JVM unnests: fewer rows cost PyFlink
#: less, but without object reuse Flink copies each unnested row, its batch's arrays
#: included, once per event, so the copying grows with the square of a batch's size.
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
    never parsed here. A batch leaves out what
    the JVM can take from elsewhere (:mod:`flink_adapter.rows`): its ``late``
    array when none is late, its ``ingestion_time`` array when its events
    share one (then ``ingested``), its ``event_time`` array when the event
    times are the ingestion times. An array left out is empty: PyFlink's
    thread mode cannot hand over a NULL array.
    """
    segment, payloads, keys = columns.segment, columns.payloads, columns.routing_keys
    events = _texts(columns) if as_text else payloads
    ingestion_times, offsets, late = columns.ingestion_times, columns.offsets, columns.late
    times = [] if _are_ingestion_times(columns) else columns.event_times
    any_late = any(late)
    for first, stop in _batches(payloads, max_events, max_bytes):
        shared = ingestion_times[first] == ingestion_times[stop - 1]  # they never fall
        yield Row(
            None,
            segment,
            ingestion_times[first] if shared else None,
            keys[first:stop],
            events[first:stop],
            times[first:stop],
            late[first:stop] if any_late and any(late[first:stop]) else [],
            offsets[first:stop],
            [] if shared else ingestion_times[first:stop],
        )


def watermark_row(watermark: int) -> Row:
    """The row of an epoch end's watermark (:func:`flink_millis`): no events, each array empty."""
    return Row(flink_millis(watermark), None, None, *([] for _ in BATCHED))


def _batches(payloads: list[bytes], max_events: int, max_bytes: int) -> Iterator[tuple[int, int]]:
    """``[first, stop)`` of each batch: at most ``max_events`` and ``max_bytes``, at least one."""
    count = len(payloads)
    first = 0
    while first < count:
        stop, size = first + 1, len(payloads[first])
        while (
            stop < count and stop - first < max_events and size + len(payloads[stop]) <= max_bytes
        ):
            size += len(payloads[stop])
            stop += 1
        yield first, stop
        first = stop


def _are_ingestion_times(columns: EventColumns) -> bool:
    """Whether each event's event time is its ingestion time (the same list, in two domains)."""
    return columns.event_times is columns.ingestion_times or (
        columns.event_times == columns.ingestion_times
    )


def _texts(columns: EventColumns) -> list[str]:
    """Each event as text; an event that is not UTF-8 is named (:func:`text_of`)."""
    try:
        return [payload.decode() for payload in columns.payloads]
    except UnicodeDecodeError:
        return [
            text_of(payload, columns.segment, offset)
            for payload, offset in zip(columns.payloads, columns.offsets, strict=True)
        ]
