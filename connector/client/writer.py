"""The event writer: routes events to segments, batches them, survives scaling."""

from __future__ import annotations

import uuid
from bisect import bisect_right
from typing import Generic, TypeVar

from connector._wire import MAX_EVENTS_PER_APPEND
from connector.client.connection import StoreClient
from connector.client.routing import key_position
from connector.client.serializers import Serializer
from connector.errors import (
    ClosedError,
    InvalidArgumentError,
    SegmentSealedError,
    StoreUnavailableError,
    TidemarkError,
)
from connector.model import SegmentDescription
from connector.names import StreamId

__all__ = ["EventWriter", "WriterConfig"]

T = TypeVar("T")


class WriterConfig:
    """Batching limits of an :class:`EventWriter`.

    Attributes:
        max_batch_bytes: a segment's batch is sent once it holds this much.
        max_batch_events: ... or this many events.
    """

    def __init__(self, max_batch_bytes: int = 1024 * 1024, max_batch_events: int = 20_000):
        if max_batch_bytes <= 0 or not 0 < max_batch_events <= MAX_EVENTS_PER_APPEND:
            msg = (
                f"batch limits must be > 0 bytes and 1 to {MAX_EVENTS_PER_APPEND} events, "
                f"got {max_batch_bytes!r} bytes, "
                f"{max_batch_events!r} events"
            )
            raise InvalidArgumentError(msg)
        self.max_batch_bytes = max_batch_bytes
        self.max_batch_events = max_batch_events

    def __repr__(self) -> str:
        return f"WriterConfig({self.max_batch_bytes}, {self.max_batch_events})"


class _Batch:
    __slots__ = ("events", "keys", "positions", "size")

    def __init__(self) -> None:
        self.events: list[bytes] = []
        self.positions: list[float] = []
        self.keys: list[str] = []
        self.size = 0


class EventWriter(Generic[T]):
    """Writes events of one stream.

    Events with the same routing key go to the same segment and are stored in
    the order written, across scaling: when a segment is found sealed, its
    unsent events move to the successor that owns their key. Events are
    durable once :meth:`flush` (or :meth:`close`) returns.

    The writer id names one sequence of events per segment, numbered from 0.
    A new writer with the id of an old one replays that sequence: events the
    store already has are skipped, so a retried task never appends twice.
    """

    def __init__(
        self,
        client: StoreClient,
        stream: str | StreamId,
        serializer: Serializer[T],
        writer_id: str | None = None,
        config: WriterConfig | None = None,
    ):
        self._client = client
        self.stream = stream if isinstance(stream, StreamId) else StreamId.parse(stream)
        self._serializer = serializer
        self.writer_id = writer_id or f"writer-{uuid.uuid4()}"
        self._config = config or WriterConfig()
        self._batches: dict[str, _Batch] = {}
        self._next_number: dict[str, int] = {}
        self._segments: list[SegmentDescription] = []
        self._lows: list[float] = []
        self._stored_times: dict[str, int] = {}
        self._closed = False
        self._refresh()

    def write_event(self, event: T, routing_key: str | None = None) -> None:
        """Queues ``event``; may send a full batch (blocking until durable).

        Raises:
            ClosedError: the writer is closed.
        """
        if self._closed:
            msg = f"writer {self.writer_id!r} is closed"
            raise ClosedError(msg)
        self._queue(self._serializer.serialize(event), key_position(routing_key), routing_key or "")

    def flush(self) -> dict[str, int]:
        """Sends every queued event; returns once all are durable.

        Returns the ingestion time the store gave the last batch stored in each
        segment since the previous flush (epoch ms, by segment name): once a
        segment's watermark passes that time, readers have seen those events.

        Raises:
            TidemarkError: a batch was not stored. Its events stay queued, in
                order, and the error says how many and where: call ``flush()``
                again to retry them (after the store is reachable again, or
                space was freed), or :meth:`discard_pending` to drop them on
                purpose. No event is ever dropped without one of the two.
        """
        while self._batches:
            segment = next(iter(self._batches))
            self._send(segment)
        stored, self._stored_times = self._stored_times, {}
        return stored

    @property
    def pending_events(self) -> int:
        """How many written events are queued and not yet stored."""
        return sum(len(batch.events) for batch in self._batches.values())

    def discard_pending(self) -> int:
        """Drops every queued event that is not stored yet; returns how many were dropped.

        The next events continue each segment's numbering, so nothing dropped
        here can be stored later by a retry.
        """
        dropped = self.pending_events
        self._batches.clear()
        return dropped

    def close(self) -> None:
        """Flushes and closes; closing twice is harmless."""
        if not self._closed:
            self.flush()
            self._closed = True

    def __enter__(self) -> EventWriter[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventWriter(stream={str(self.stream)!r}, writer_id={self.writer_id!r})"

    # --- internals ------------------------------------------------------------

    def _queue(self, data: bytes, position: float, key: str) -> None:
        segment = self._segments[bisect_right(self._lows, position) - 1].segment
        batch = self._batches.get(segment)
        if batch is None:
            batch = self._batches[segment] = _Batch()
        batch.events.append(data)
        batch.positions.append(position)
        batch.keys.append(key)
        batch.size += len(data)
        config = self._config
        if batch.size >= config.max_batch_bytes or len(batch.events) >= config.max_batch_events:
            self._send(segment)

    def _send(self, segment: str) -> None:
        batch = self._batches.pop(segment)
        first = self._next_number.get(segment, 0)
        try:
            keys = batch.keys if any(batch.keys) else None
            result = self._client.append(segment, self.writer_id, first, batch.events, keys)
        except SegmentSealedError:
            self._reroute_after_scaling(batch)
            return
        except StoreUnavailableError:
            self._batches[segment] = batch  # resent by the next flush, with the same numbers
            raise
        except TidemarkError as error:
            self._batches[segment] = batch  # kept: dropping it would lose events silently
            msg = (
                f"{error} ({len(batch.events)} event(s) to {segment!r} were not stored and "
                "stay queued: flush() retries them, discard_pending() drops them)"
            )
            raise type(error)(msg) from error
        self._next_number[segment] = first + len(batch.events)
        self._stored_times[segment] = result.ingestion_time

    def _reroute_after_scaling(self, sealed_batch: _Batch) -> None:
        """Moves the events of every segment no longer open to the successors owning their keys."""
        self._refresh()
        open_names = {s.segment for s in self._segments}
        stranded = [sealed_batch] + [
            self._batches.pop(name) for name in list(self._batches) if name not in open_names
        ]
        for batch in stranded:
            for data, position, key in zip(batch.events, batch.positions, batch.keys, strict=True):
                self._queue(data, position, key)

    def _refresh(self) -> None:
        description = self._client.describe_stream(self.stream.scope, self.stream.stream)
        self._segments = list(description.open_segments)
        if not self._segments:
            msg = f"stream {str(self.stream)!r} is sealed: it takes no more events"
            raise TidemarkError(msg)
        self._lows = [s.key_low for s in self._segments]
