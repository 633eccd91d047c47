"""Following a stream's tail: events as they arrive, and the watermark between them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from connector.client import StoreClient
from connector.framing import iter_frames
from connector.groups.state import stream_cut
from connector.names import StreamId
from connector.reader.source.cuts import start_state

__all__ = ["EventSeen", "WatermarkSeen", "tail"]


@dataclass(frozen=True)
class EventSeen:
    """An event read from ``segment`` at ``offset``, stamped at ``ingestion_time``."""

    segment: str
    offset: int
    ingestion_time: int
    payload: bytes
    routing_key: str | None


@dataclass(frozen=True)
class WatermarkSeen:
    """A segment's watermark rose to ``watermark`` (ingestion time, epoch ms)."""

    segment: str
    watermark: int


def tail(
    client: StoreClient,
    stream: StreamId,
    from_start: bool = False,
    timeout_s: float | None = None,
    poll_ms: int = 200,
    stopped: Callable[[], bool] = lambda: False,
) -> Iterator[EventSeen | WatermarkSeen]:
    """Events of ``stream`` as they arrive, with a :class:`WatermarkSeen` whenever one rises.

    Starts at the open segments' tails (or, ``from_start``, at the first
    readable offset of every segment: the reader core's earliest), follows
    successors once a segment ends, and stops after ``timeout_s`` seconds
    (never when None), when every segment has ended, or once ``stopped()``
    says so: it is asked before each read, and a read waits at most a second.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    start = start_state(client, [stream], "earliest" if from_start else "latest")
    offsets = stream_cut(start)
    seen = set(offsets) | start.finished
    marks: dict[str, int] = {}
    while offsets and not stopped():
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return
        wait_ms = poll_ms if len(offsets) > 1 else 1_000
        if remaining is not None:
            wait_ms = max(0, min(wait_ms, int(remaining * 1000)))
        for segment, offset in sorted(offsets.items()):
            if stopped():
                return
            result = client.read(
                segment, offset, wait_ms=wait_ms, known_watermark=marks.get(segment)
            )
            for frame in iter_frames(result.data, result.offset):
                yield EventSeen(
                    segment, frame.offset, frame.ingestion_time, frame.payload, frame.routing_key
                )
            offsets[segment] = result.next_offset
            if result.watermark > marks.get(segment, -1):
                marks[segment] = result.watermark
                yield WatermarkSeen(segment, result.watermark)
            if result.end_of_segment and result.next_offset == offset:
                del offsets[segment]
                for successor in result.successors:
                    if successor not in seen:
                        seen.add(successor)
                        offsets[successor] = 0
