"""Reading a task: ranges to frames to event times to columns, the one read path of every engine.

:func:`read_columns` reads a :class:`~connector.reader.source.tasks.ReadTask`
store read by store read and yields each read's events as
:class:`EventColumns`: plain lists, one per field, which the Spark adapter
turns into Arrow record batches and the Flink adapter into its batch rows.
Only what needs Python per event runs per event: the frames' decoding
(:func:`connector.framing.decode_answer`, which checks one CRC per store
answer rather than every frame again) and, when event time is not the
ingestion time, the timestamp assigner; with event time from ingestion no
event is parsed at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from connector.client.connection import StoreClient
from connector.errors import InvalidArgumentError
from connector.framing import FrameColumns, decode_answer
from connector.model import ReadResult
from connector.reader.source.ranges import READ_CHUNK_BYTES, read_range
from connector.reader.source.read_ahead import read_ahead
from connector.reader.source.tasks import ReadTask
from connector.reader.source.timekeeping import TimeKeeping, is_late
from connector.timestamps import FieldTimestampAssigner, TimestampAssigner

try:  # orjson parses JSON events several times faster; json is the fallback
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson comes with the engines' extras
    _loads = json.loads

__all__ = ["EventColumns", "EventTimes", "columns_of", "read_columns", "text_of"]


@dataclass(frozen=True)
class EventColumns:
    """Whole events of one segment, in order, as columns of equal length.

    Attributes:
        segment: the segment they are stored in.
        offsets: where each is stored.
        ingestion_times: when the store took each, epoch ms.
        routing_keys: each one's routing key, or None.
        payloads: each one's stored bytes.
        event_times: each one's event time, epoch ms (the timestamp assigner's).
        watermark_in_force: the watermark they were read under, or None.
    """

    segment: str
    offsets: list[int]
    ingestion_times: list[int]
    routing_keys: list[str | None]
    payloads: list[bytes]
    event_times: list[int]
    watermark_in_force: int | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    @cached_property
    def late(self) -> list[bool]:
        """Whether each event is late: at or below the watermark in force (none without one)."""
        in_force = self.watermark_in_force
        if in_force is None:
            return [False] * len(self.offsets)
        return [is_late(t, in_force) for t in self.event_times]


def read_columns(
    client: StoreClient,
    task: ReadTask,
    time: TimeKeeping,
    deserializer: str,
    chunk_bytes: int = READ_CHUNK_BYTES,
    ahead: int = 0,
) -> Iterator[EventColumns]:
    """The events of ``task``'s ranges, in order, a store read of ``chunk_bytes`` at a time.

    Event times come from ``time``'s assigner (events deserialized with
    ``deserializer`` only when it needs them); an event is late when its
    event time is at or below the task's watermark in force. With ``ahead``
    the store reads run in a thread of their own, up to that many reads
    ahead of the decoding (:func:`~connector.reader.source.read_ahead.read_ahead`);
    the events and errors come out the same, in the same order.

    Raises:
        InvalidArgumentError: an event the assigner cannot time, or not
            UTF-8 text for a text deserializer that must read it, naming it.
        DataLossError: the store's, for a damaged event, after every event before it.
    """
    times = EventTimes(time, deserializer)
    in_force = task.watermark_in_force
    results = _reads(client, task, chunk_bytes)
    for segment, result in read_ahead(results, ahead) if ahead else results:
        if result.data:
            yield columns_of(segment, result.data, result.offset, times, in_force, result.checksum)


def _reads(
    client: StoreClient, task: ReadTask, chunk_bytes: int
) -> Iterator[tuple[str, ReadResult]]:
    """Each store read of ``task``, with the segment of its range."""
    for segment_range in task.ranges:
        for result in read_range(client, segment_range, chunk_bytes):
            yield segment_range.segment, result


def columns_of(
    segment: str,
    data: bytes,
    offset: int,
    times: EventTimes,
    watermark_in_force: int | None = None,
    checksum: int | None = None,
) -> EventColumns:
    """The events of ``data`` (whole frames of ``segment`` from ``offset``) as columns.

    ``checksum`` is the store's CRC-32 of ``data`` (see :func:`connector.framing.decode_answer`).
    """
    frames = decode_answer(data, offset, checksum)
    return EventColumns(
        segment,
        frames.offsets,
        frames.ingestion_times,
        frames.routing_keys,
        frames.payloads,
        times.of(segment, frames),
        watermark_in_force,
    )


class EventTimes:
    """The event times of decoded frames under one time keeping and deserializer.

    The one place that decides whether an event must be parsed for its
    time: never when event time is the ingestion time; a JSON event with an
    integer timestamp field is read with a fast parser; anything else goes
    through the deserializer and the assigner.
    """

    def __init__(self, time: TimeKeeping, deserializer: str):
        self._assigner: TimestampAssigner[Any] | None = (
            None if time.event_time_is_ingestion_time else time.assigner
        )
        self._deserializer = deserializer

    def of(self, segment: str, frames: FrameColumns) -> list[int]:
        """Each frame's event time, epoch ms."""
        assigner = self._assigner
        if assigner is None:
            return frames.ingestion_times
        if self._deserializer == "json":
            return self._json_times(assigner, frames)
        if self._deserializer == "string":
            values: list[Any] = [
                text_of(payload, segment, offset)
                for payload, offset in zip(frames.payloads, frames.offsets, strict=True)
            ]
        else:
            values = frames.payloads
        extract = assigner.extract_timestamp
        return [extract(v, t) for v, t in zip(values, frames.ingestion_times, strict=True)]

    @staticmethod
    def _json_times(assigner: TimestampAssigner[Any], frames: FrameColumns) -> list[int]:
        field = assigner.field if isinstance(assigner, FieldTimestampAssigner) else None
        times = []
        for payload, ingestion_time in zip(frames.payloads, frames.ingestion_times, strict=True):
            value = _loads(payload)
            stamp = value.get(field) if field is not None and type(value) is dict else None
            if type(stamp) is not int:  # absent, ISO text, or a function's: the assigner decides
                stamp = assigner.extract_timestamp(value, ingestion_time)
            times.append(stamp)
        return times


def text_of(payload: bytes, segment: str, offset: int) -> str:
    """``payload`` as UTF-8 text; raises naming the event when it is not."""
    try:
        return payload.decode()
    except UnicodeDecodeError as error:
        msg = (
            f"the event at offset {offset} of segment {segment} is not UTF-8 text "
            f"({error.reason} at byte {error.start}); read it with deserializer 'bytes'"
        )
        raise InvalidArgumentError(msg) from None
