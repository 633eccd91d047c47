"""What a reader subtask does with a read task: whole events, their event time, their lateness.

Plain Python over the store client, so it is tested without Flink.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from connector.client.connection import StoreClient
from connector.client.serializers import Serializer
from connector.framing import iter_frames
from connector.reader.planning import SegmentRange, read_range
from connector.reader.timestamps import TimestampAssigner
from flink_adapter.epochs import ReadTask

__all__ = ["ReadEvent", "read_task"]


@dataclass(frozen=True)
class ReadEvent:
    """One event as a reader subtask emits it.

    Attributes:
        routing_key: the key it was written with, or None.
        event: the event as Flink carries it: bytes for the bytes schema, text for the
            string and JSON schemas (the JSON schema's timestamp assigner saw the parsed value).
        event_time: epoch ms, from the timestamp assigner.
        late: whether ``event_time`` is at or below the watermark in force when it was read.
        segment, offset: where it is stored.
        ingestion_time: the store's ingestion time for it, epoch ms.
        size: its stored payload's size in bytes.
    """

    routing_key: str | None
    event: Any
    event_time: int
    late: bool
    segment: str
    offset: int
    ingestion_time: int
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
    rather than its bytes.
    """
    in_force = task.watermark_in_force
    for segment, start, stop in task.ranges:
        for result in read_range(client, SegmentRange(segment, start, stop)):
            for frame in iter_frames(result.data, result.offset):
                event = serializer.deserialize(frame.payload)
                event_time = assigner.extract_timestamp(event, frame.ingestion_time)
                yield ReadEvent(
                    routing_key=frame.routing_key,
                    event=frame.payload.decode() if as_text else frame.payload,
                    event_time=event_time,
                    late=in_force is not None and event_time <= in_force,
                    segment=segment,
                    offset=frame.offset,
                    ingestion_time=frame.ingestion_time,
                    size=len(frame.payload),
                )
