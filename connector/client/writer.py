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
    DuplicateEventNumbersError,
    InvalidArgumentError,
    SegmentSealedError,
    StoreUnavailableError,
    TidemarkError,
)
from connector.model import AppendResult, SegmentDescription
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
    """A segment's queued events; ``sent`` of them went out in a call whose fate is unknown."""

    __slots__ = ("events", "keys", "positions", "sent", "size")

    def __init__(self) -> None:
        self.events: list[bytes] = []
        self.positions: list[float] = []
        self.keys: list[str] = []
        self.size = 0
        self.sent = 0


class EventWriter(Generic[T]):
    """Writes events of one stream.

    Events with the same routing key go to the same segment and are stored in
    the order written, across scaling: when a segment is found sealed, its
    unsent events move to the successor that owns their key. Events are
    durable once :meth:`flush` (or :meth:`close`) returns.

    The writer id names one sequence of events per segment, numbered from 0.
    A new writer with the id of an old one replays that sequence: events the
    store already has are skipped, so a retried task never appends twice.
    A writer id belongs to one writer at a time: once this writer has stored
    events in a segment, an answer that calls any of its later events there
    duplicates it never sent before raises :class:`DuplicateEventNumbersError`
    naming them, never passes for success.
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
        # Per segment: the first number of events discarded without knowing whether they
        # were stored, until an append announcing the gap is stored.
        self._discarded_from: dict[str, int] = {}
        # Segments where an answer placed this writer's sequence (events appended): from
        # then on, only events sent before may come back as duplicates.
        self._placed: set[str] = set()
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
            DuplicateEventNumbersError: the store skipped events of a batch as
                duplicates that this writer never sent before (another writer
                has its id); they are not stored, not queued, and named in the
                error with their payloads. The rest of the batch is stored.
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
        """Drops every queued event; returns how many were dropped.

        An event queued but never sent is simply dropped. An event of a batch
        whose sending failed has an unknown fate: the store may have stored it
        though its answer was lost (or may still store a copy of the request
        that is under way). Dropping it means giving up on knowing: it may
        already be stored, once, in order. Its event number is never given to
        another event: the writer's next batch to that segment carries the
        numbers after it and announces the gap, and once that batch is stored
        no copy of a dropped one can be stored any more.
        """
        dropped = self.pending_events
        for segment, batch in self._batches.items():
            if batch.sent:
                first = self._next_number.get(segment, 0)
                self._discarded_from.setdefault(segment, first)
                self._next_number[segment] = first + len(batch.events)
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
            result = self._client.append(
                segment,
                self.writer_id,
                first,
                batch.events,
                keys,
                discarded_from=self._discarded_from.get(segment),
            )
        except SegmentSealedError:
            # Refused whole, and a sealed segment takes nothing later: no copy can be stored.
            self._reroute_after_scaling(batch)
            return
        except StoreUnavailableError:
            batch.sent = len(batch.events)
            self._batches[segment] = batch  # resent by the next flush, with the same numbers
            raise
        except TidemarkError as error:
            # A send of an earlier try may still be on its way, so its fate is unknown too.
            batch.sent = len(batch.events)
            self._batches[segment] = batch  # kept: dropping it would lose events silently
            msg = (
                f"{error} ({len(batch.events)} event(s) to {segment!r} were not stored and "
                "stay queued: flush() retries them, discard_pending() drops them)"
            )
            raise type(error)(msg) from error
        self._next_number[segment] = first + len(batch.events)
        self._discarded_from.pop(segment, None)
        placed = segment in self._placed
        if result.appended:
            self._stored_times[segment] = result.ingestion_time
            self._placed.add(segment)
        self._check_duplicates(segment, first, batch, result, placed)

    def _check_duplicates(
        self, segment: str, first: int, batch: _Batch, result: AppendResult, placed: bool
    ) -> None:
        """Raises if the store skipped events of ``batch`` that no earlier send can explain.

        Duplicates are explained by a send of this batch whose answer was lost
        (an earlier flush, or the client's own resend), and, until an append of
        this writer here was stored (``placed``), by a replay of the writer
        id's sequence.
        """
        explained = len(batch.events) if result.resent or not placed else batch.sent
        if result.duplicates <= explained:
            return
        lost = slice(explained, result.duplicates)
        numbers = f"{first + explained} to {first + result.duplicates - 1}"
        msg = (
            f"the store skipped {result.duplicates - explained} event(s) to {segment!r} "
            f"(numbers {numbers} of writer {self.writer_id!r}) as duplicates, but this writer "
            "never sent them before: another writer is using its id; they are not stored"
        )
        raise DuplicateEventNumbersError(
            msg,
            segment,
            self.writer_id,
            first + explained,
            tuple(batch.events[lost]),
            tuple(batch.keys[lost]),
        )

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
