"""What a reader subtask does with a read task: whole events, their event time, their lateness.

Plain Python over the store client, so it is tested without Flink.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from connector.client.connection import StoreClient
from connector.client.serializers import Serializer
from connector.framing import iter_frames
from connector.reader.planning import SegmentRange, read_range
from connector.reader.timestamps import IngestionTimeAssigner, TimestampAssigner
from flink_adapter.epochs import ReadTask

__all__ = ["EVENTS_PER_BATCH", "BYTES_PER_BATCH", "ReadEvent", "batched", "read_task"]

#: The most events, and payload bytes, in one batch (a larger event is a batch of its own).
#: A reader emits a batch as one Flink row, which the JVM unnests: fewer rows cost PyFlink
#: less, but without object reuse Flink copies each unnested row, its batch included, once
#: per event, so the copying grows with the square of a batch's size. With events of 100
#: bytes, batches of 32 gave 60,000 events/s; of 10, 50,000; of 100, 43,000.
EVENTS_PER_BATCH = 32
BYTES_PER_BATCH = 4096


class ReadEvent(NamedTuple):
    """One event as a reader subtask emits it (a tuple: one is built per event).

    Attributes:
        routing_key: the key it was written with, or None.
        event: the event as Flink carries it: bytes for the bytes schema, text for the
            string and JSON schemas (the JSON schema's timestamp assigner saw the parsed value).
        event_time: epoch ms, from the timestamp assigner.
        late: whether ``event_time`` is at or below the watermark in force when it was read.
        offset: where it is stored in ``segment``.
        ingestion_time: the store's ingestion time for it, epoch ms.
        segment: the segment it is stored in.
        size: its stored payload's size in bytes.
    """

    routing_key: str | None
    event: Any
    event_time: int
    late: bool
    offset: int
    ingestion_time: int
    segment: str
    size: int


def read_task(
    client: StoreClient,
    task: ReadTask,
    serializer: Serializer[Any],
    assigner: TimestampAssigner[Any],
    as_text: bool,
) -> Iterator[ReadEvent]:
    """The events of ``task``'s ranges, in order, each flagged late or not.

    ``as_text``: emit each event as its UTF-8 text (string and JSON schemas)
    rather than its bytes. An event is deserialized only for a timestamp
    assigner that reads it: with event time from ingestion, the JSON schema's
    events pass through as their text, unparsed.
    """
    in_force = task.watermark_in_force
    parse = not isinstance(assigner, IngestionTimeAssigner)
    for segment, start, stop in task.ranges:
        for result in read_range(client, SegmentRange(segment, start, stop)):
            for frame in iter_frames(result.data, result.offset):
                payload = frame.payload
                ingestion_time = frame.ingestion_time
                event_time = (
                    assigner.extract_timestamp(serializer.deserialize(payload), ingestion_time)
                    if parse
                    else ingestion_time
                )
                yield ReadEvent(
                    frame.routing_key,
                    payload.decode() if as_text else payload,
                    event_time,
                    in_force is not None and event_time <= in_force,
                    frame.offset,
                    ingestion_time,
                    segment,
                    len(payload),
                )


def batched(
    events: Iterable[ReadEvent],
    max_events: int = EVENTS_PER_BATCH,
    max_bytes: int = BYTES_PER_BATCH,
) -> Iterator[list[ReadEvent]]:
    """``events`` in order, in batches of one segment's events.

    A batch holds at most ``max_events`` events and ``max_bytes`` payload
    bytes, and at least one event.
    """
    batch: list[ReadEvent] = []
    size = 0
    for event in events:
        if batch and (
            event.segment != batch[0].segment
            or len(batch) == max_events
            or size + event.size > max_bytes
        ):
            yield batch
            batch, size = [], 0
        batch.append(event)
        size += event.size
    if batch:
        yield batch
