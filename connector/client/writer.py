"""The event writer: routes events to segments, batches them, survives scaling, notes time.

:class:`EventWriter` composes three parts and holds no logic of theirs (as
Pravega's ``EventStreamWriterImpl`` does): a
:class:`~connector.client.segment_router.SegmentRouter` (which open segment
takes an event), :class:`~connector.client.batches.SegmentBatches` (what is
queued per segment, and its numbers) and an
:class:`~connector.client.assertion_ledger.AssertionLedger` (what it
asserted, what is due, what rides on the next append). It sends, and tells
each part what came back.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Generic, TypeVar

from connector._wire import MAX_EVENTS_PER_APPEND
from connector.client.assertion_ledger import AssertionLedger
from connector.client.batches import Batch, SegmentBatches
from connector.client.connection import StoreClient
from connector.client.routing import key_position
from connector.client.segment_router import SegmentRouter
from connector.client.serializers import Serializer
from connector.errors import (
    ClosedError,
    InvalidArgumentError,
    SegmentSealedError,
    StoreUnavailableError,
    TidemarkError,
)
from connector.model import Assertion, AssertionResult, SegmentDescription
from connector.names import StreamId
from connector.timestamps import (
    FieldTimestampAssigner,
    IngestionTimeAssigner,
    TimestampAssigner,
    to_millis,
)

__all__ = ["EventWriter", "WriterConfig"]

T = TypeVar("T")


class WriterConfig:
    """Batching limits of an :class:`EventWriter`, and whether it asserts event time itself.

    Args:
        max_batch_bytes: a segment's batch is sent once it holds this much.
        max_batch_events: ... or this many events.
        assert_watermarks_from: when set, the event time of each event
            written (a :class:`~connector.timestamps.TimestampAssigner`,
            or the name of a JSON field holding it); after each
            :meth:`EventWriter.flush` the writer asserts the least event time
            it still accepts, minus one: the greatest event time written
            less ``max_out_of_orderness`` (Flink's bounded
            out-of-orderness), less one. While it holds nobody back (before
            its first assertion, or after :meth:`EventWriter.mark_idle`), it
            first joins before its next events, in the call that carries
            them: at the least event time among them less the bound, less
            one, so none of them within the bound is late because the
            writer was not holding the watermark yet.
        max_out_of_orderness: how far behind the latest event time written
            a later event may still be (ms, or a timedelta); kept in ms as
            the attribute ``max_out_of_orderness_ms``.

    The other arguments are kept as attributes of their own names.
    """

    def __init__(
        self,
        max_batch_bytes: int = 1024 * 1024,
        max_batch_events: int = 20_000,
        assert_watermarks_from: TimestampAssigner[Any] | str | None = None,
        max_out_of_orderness: int | timedelta = 0,
    ):
        if max_batch_bytes <= 0 or not 0 < max_batch_events <= MAX_EVENTS_PER_APPEND:
            msg = (
                f"batch limits must be > 0 bytes and 1 to {MAX_EVENTS_PER_APPEND} events, "
                f"got {max_batch_bytes!r} bytes, "
                f"{max_batch_events!r} events"
            )
            raise InvalidArgumentError(msg)
        self.max_batch_bytes = max_batch_bytes
        self.max_batch_events = max_batch_events
        self.assert_watermarks_from = _writer_assigner(assert_watermarks_from)
        self.max_out_of_orderness_ms = to_millis("max_out_of_orderness", max_out_of_orderness)

    def __repr__(self) -> str:
        asserting = (
            ""
            if self.assert_watermarks_from is None
            else f", assert_watermarks_from={self.assert_watermarks_from!r}, "
            f"max_out_of_orderness={self.max_out_of_orderness_ms}"
        )
        return f"WriterConfig({self.max_batch_bytes}, {self.max_batch_events}{asserting})"


def _writer_assigner(given: Any) -> TimestampAssigner[Any] | None:
    """The assigner a writer takes event times from; a name is a JSON field."""
    if given is None:
        return None
    if isinstance(given, str):
        return FieldTimestampAssigner(given)
    if isinstance(given, IngestionTimeAssigner) or not isinstance(given, TimestampAssigner):
        msg = (
            f"assert_watermarks_from must be a TimestampAssigner of the event or a JSON field "
            f"name (a writer knows no ingestion time), got {given!r}"
        )
        raise InvalidArgumentError(msg)
    return given


class EventWriter(Generic[T]):
    """Writes events of one stream.

    Events with the same routing key go to the same segment and are stored
    in the order written, across scaling: the unsent events of a segment
    found sealed move to the successor owning their key (a sealed stream
    raises :class:`FailedPreconditionError`, on creation too). Events are
    durable once :meth:`flush` (or :meth:`close`) returns.

    The writer id names one sequence of events per segment, numbered from
    0. A new writer with an old one's id replays it: events the store has
    already are skipped, so a retried task never appends twice. A writer id
    belongs to one writer at a time: once this writer stored events in a
    segment, an answer calling later ones there duplicates it never sent
    raises :class:`DuplicateEventNumbersError` naming them, never passes.

    Event time (seed 002): :meth:`note_time` asserts that every later event
    of this writer has an event time above a time, on every open segment of
    the stream (the store takes, at each position, the least assertion of
    the writers active there); :meth:`mark_idle` takes the writer out of
    that set until it asserts again; :meth:`close` marks it idle. A writer
    holds the watermark back only from its first assertion on: events it
    writes before then, or while idle, come after whatever the others
    asserted, and a reader whose watermark passed their times flags them
    late. With ``assert_watermarks_from`` the writer joins before such
    events by itself (see :class:`WriterConfig`); asserting by hand, call
    :meth:`note_time` below their times before writing them. Assertions are
    numbered like events: a retried one is stored once; an old id replays them.

    ``numbers_from`` makes a new incarnation of a writer id instead of a
    replay: its events and assertions are numbered from there (above any
    number an earlier incarnation used), and its first append to each
    segment announces the numbers below as discarded, so no late copy of an
    earlier incarnation's batch can be stored after it.
    """

    def __init__(
        self,
        client: StoreClient,
        stream: str | StreamId,
        serializer: Serializer[T],
        writer_id: str | None = None,
        config: WriterConfig | None = None,
        numbers_from: int = 0,
    ):
        stream_id = stream if isinstance(stream, StreamId) else StreamId.parse(stream)
        self.writer_id = writer_id or f"writer-{uuid.uuid4()}"
        self._client = client
        self._serializer = serializer
        self._config = config = config or WriterConfig()
        self._batches = SegmentBatches(
            self.writer_id, numbers_from, config.max_batch_bytes, config.max_batch_events
        )
        who = f"writer {self.writer_id!r} on {stream_id}"
        self._ledger = AssertionLedger(numbers_from, config.max_out_of_orderness_ms, who)
        self._closed = False
        self._router = SegmentRouter(client, stream_id)

    @property
    def stream(self) -> StreamId:
        """The stream this writer writes."""
        return self._router.stream

    def write_event(self, event: T, routing_key: str | None = None) -> None:
        """Queues ``event``; may send a full batch (blocking until durable).

        Raises:
            ClosedError: the writer is closed.
        """
        self._check_open()
        assigner = self._config.assert_watermarks_from
        if assigner is not None:
            self._ledger.on_event(assigner.extract_timestamp(event, 0))
        self._queue(self._serializer.serialize(event), key_position(routing_key), routing_key or "")

    def flush(self) -> dict[str, int]:
        """Sends every queued event; returns once all are durable.

        Returns the ingestion time the store gave the last batch stored in each
        segment since the previous flush (epoch ms, by segment name): once a
        segment's watermark passes that time, readers have seen those events.
        With ``assert_watermarks_from``, the assertion due after the flush
        rides on its last append (or goes alone when nothing was queued), a
        due join rides on its first append, before the events, and an
        assertion whose send failed earlier goes again with its number.

        Raises:
            DuplicateEventNumbersError: the store skipped events of a batch as
                duplicates this writer never sent (another writer has its
                id); they are not stored nor queued, and the error names them
                with their payloads. The rest of the batch is stored.
            TidemarkError: a batch was not stored. Its events stay queued, in
                order, and the error says how many and where: ``flush()``
                retries them (once the store is reachable or space freed);
                :meth:`discard_pending` drops them. None is dropped otherwise.
        """
        self._ledger.ride_due()
        self._send_all()
        return self._batches.stored_times()

    def note_time(self, event_time_ms: int) -> AssertionResult:
        """Asserts that every later event of this writer has an event time above ``event_time_ms``.

        Flushes first, so the assertion comes after every event written so
        far, on every open segment of the stream; returns once the events and
        the assertion are durable. With events queued, it rides on the
        flush's last append (one call for both, on the file store one commit:
        :class:`~connector.model.Assertion`); without, it goes alone, so an
        idle writer asserts too. If it raises, the assertion is not known to
        be stored (a later flush sends it again, with its number, when the
        failure left its fate unknown). The writer joins the stream's set of
        writers holding its event-time watermark (seed 002), or moves its
        place in it. ``stored`` is False when the store had this assertion
        already (a replay of this writer id's sequence).

        Raises:
            InvalidArgumentError: ``event_time_ms`` is below this writer's
                previous assertion (a watermark never steps back); events
                it would have ridden on stay queued.
            FailedPreconditionError: the stream is sealed.
            TidemarkError: as :meth:`flush`.
        """
        return self._flush_asserting(event_time_ms)

    def mark_idle(self) -> AssertionResult:
        """Takes this writer out of the set holding the event-time watermark until it asserts again.

        Flushes first (the idle mark rides on the last append, as an
        assertion does); returns once durable. While idle the writer holds
        nobody back: its later events may come after a watermark above their
        event time (readers flag them late).
        """
        return self._flush_asserting(None)

    @property
    def asserted(self) -> int | None:
        """The latest assertion's event time, stored or refused alike (None: none yet)."""
        return self._ledger.asserted

    @property
    def late_events(self) -> int:
        """Events written at or below what it had asserted: stored, and flagged late by readers."""
        return self._ledger.late_events

    @property
    def pending_events(self) -> int:
        """How many written events are queued and not yet stored."""
        return self._batches.pending_events

    def discard_pending(self) -> int:
        """Drops every queued event; returns how many were dropped.

        An event never sent is simply dropped. One of a batch whose send
        failed has an unknown fate (its answer lost, or a copy still under
        way): dropping it gives up on knowing; it may be stored, once, in
        order. Its number is never reused: the next batch to that segment
        announces the gap, and once that is stored no copy of a dropped one
        can be stored any more.
        """
        return self._batches.discard_pending()

    def close(self) -> None:
        """Flushes, marks the writer idle if it asserted event time, and closes.

        Closing twice is harmless.
        """
        if not self._closed:
            if self._ledger.holding:
                self._flush_asserting(None)
            else:
                self.flush()
            self._closed = True

    def __enter__(self) -> EventWriter[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventWriter(stream={str(self.stream)!r}, writer_id={self.writer_id!r})"

    def _check_open(self) -> None:
        if self._closed:
            msg = f"writer {self.writer_id!r} is closed"
            raise ClosedError(msg)

    def _queue(self, data: bytes, position: float, key: str) -> None:
        segment = self._router.segment_for(position)
        if self._batches.add(segment, data, position, key):  # full
            self._send(segment)

    def _flush_asserting(self, event_time: int | None) -> AssertionResult:
        """Flushes with an assertion riding on the last append, or sent on its own after."""
        self._check_open()
        self._ledger.ride(event_time)  # supersedes one an earlier flush failed to send
        self._send_all()
        return self._ledger.answer()

    def _send_all(self) -> None:
        """Sends every queued batch; then the assertions that found none to ride on."""
        while (segment := self._batches.next_segment()) is not None:
            self._send(segment)
        joining = self._ledger.joining
        if joining is not None:
            self._ledger.joined(self._assert_alone(joining))
        riding = self._ledger.riding
        if riding is not None:
            self._ledger.answered(self._assert_alone(riding))

    def _assert_alone(self, assertion: Assertion) -> AssertionResult:
        """Sends ``assertion`` in a call of its own, with the fences of the gaps left open."""
        fences = self._batches.fences()
        scope, name = self.stream.scope, self.stream.stream
        with self._ledger.sending(assertion):
            result = self._client.assert_watermark(
                scope, name, self.writer_id, assertion.number, assertion.event_time, fences
            )
        if result.stored:
            self._batches.fenced(fences)
        return result

    def _send(self, segment: str) -> None:
        """Appends ``segment``'s batch: after a due joining assertion, before the last one.

        A writer that holds nobody back joins before its events (see
        :meth:`AssertionLedger.join_due`), on this append, or alone first
        when another segment has a gap to fence.
        """
        self._ledger.join_due()
        joining = self._ledger.joining
        if joining is not None and not self._batches.gaps_only_in(segment):
            self._ledger.joined(self._assert_alone(joining))
            joining = None
        batch = self._batches.take(segment)
        first, gap = self._batches.first_number(segment), self._batches.announced(segment)
        riding = self._ledger.riding if self._batches.may_carry_assertion(segment) else None
        try:
            with self._ledger.sending(joining, riding):
                result = self._client.append(
                    segment,
                    self.writer_id,
                    first,
                    batch.events,
                    batch.routing_keys,
                    gap,
                    riding,
                    joining,
                )
        except SegmentSealedError:
            # Refused whole, and a sealed segment takes nothing later: no copy can be stored.
            self._reroute_after_scaling(batch)
            return
        except TidemarkError as error:
            # Kept, to go again with the same numbers: dropping it would lose events silently.
            self._batches.keep(segment, batch)
            if isinstance(error, StoreUnavailableError):
                raise
            msg = (
                f"{error} ({len(batch.events)} event(s) to {segment!r} were not stored and "
                "stay queued: flush() retries them, discard_pending() drops them)"
            )
            raise type(error)(msg) from error
        unexplained = self._batches.stored(segment, first, batch, result)
        if joining is not None and result.joining is not None:
            self._ledger.joined(result.joining)
        if riding is not None and result.assertion is not None:
            self._ledger.answered(result.assertion)
        if unexplained is not None:
            raise unexplained

    def _reroute_after_scaling(self, sealed_batch: Batch) -> None:
        """Moves the events of every segment no longer open to the successors owning their keys."""
        self._router.refresh()
        for batch in [sealed_batch, *self._batches.take_stranded(self._router.open_names())]:
            for data, position, key in batch.queued():
                self._queue(data, position, key)

    @property
    def _segments(self) -> tuple[SegmentDescription, ...]:
        """The open segments as last described (the router's)."""
        return self._router.segments
