"""A server's writes to streams' logs: compare-and-sets, decided again when another wrote first.

Every write expects the last message this server saw of what it changes:

- an **append** (one message, or an atomic batch of messages when it is
  larger than one) and an **idle tick** expect their segment's last message
  (JetStream's ``Nats-Expected-Last-Subject-Sequence``);
- a **stream record** (a scale, a seal, a truncation, an assertion, writers'
  timeouts) expects the stream's last record, and goes in one atomic batch
  after a seal marker on each segment it seals or a fence on each segment
  whose event time it changes, each expecting that segment's last message:
  nothing lands on a sealed segment after its seal, and an assertion lands
  after every event of its writer this server saw stored.

A write that loses (``WrongLastSequence``) or whose answer is lost brings
the view up to date (:meth:`~.followers.Followers.sync`) and is decided
again by the function the store's front gave: the decision always stands on
the state the write lands after. Each write is applied to this server's
view as soon as JetStream acknowledges it (:meth:`~.log.StreamLog.apply_published`),
so a writer reads its own writes on the server it wrote through.

A write whose answer is lost, or that meets the cluster unable to answer,
waits before its next try (a :class:`~.engine.Backoff`: exponential, with
jitter), and everything it does is bounded by one budget,
``unavailable_retry_s``: its requests, and the syncs between its tries. It
then fails UNAVAILABLE, having cost the cluster a request or two a try, not
a storm of them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from connector.errors import FailedPreconditionError, TidemarkError
from connector.model import AppendResult
from connector.store.engine import Batch, Decide, PlanBatch
from connector.store.jetstream.cache import PayloadCache
from connector.store.jetstream.chunks import split_append
from connector.store.jetstream.config import JetStreamConfig
from connector.store.jetstream.engine import (
    Backoff,
    Engine,
    EngineUnavailable,
    StreamMissing,
    SubjectBusy,
    WrongLastSequence,
)
from connector.store.jetstream.follower import Follower
from connector.store.jetstream.followers import PUSH_GRACE_S, Followers
from connector.store.jetstream.messages import (
    Appended,
    TickMessage,
    append_headers,
    fence_headers,
    meta_headers,
    tick_headers,
)
from connector.store.jetstream.naming import meta_subject
from connector.store.jetstream.segment import JetStreamSegment
from connector.store.records import (
    Record,
    StreamScaled,
    StreamSealed,
    WatermarkAsserted,
    WritersTimedOut,
)
from connector.store.streams import StreamEntry

__all__ = ["HEADER_ROOM", "Publisher"]

_T = TypeVar("_T")

#: Room left in a message for its headers (the append's own, and JetStream's batch headers).
HEADER_ROOM = 16 * 1024

#: Runs a coroutine on the engine's loop from a caller's thread; refuses once the store closed.
Run = Callable[[Coroutine[Any, Any, _T]], _T]


class Publisher:
    """Publishes one server's changes; see the module docstring.

    Args:
        nats: the connection to the cluster.
        followers: this server's followed streams (whose views a publish updates).
        cache: the payload cache, which keeps what an append published.
        run: runs a coroutine on the loop (see :data:`Run`).
        gone: what a stream JetStream says is missing is (deleted, or unreachable).
        committed: told of each append stored (metrics).
    """

    def __init__(
        self,
        nats: Engine,
        followers: Followers,
        cache: PayloadCache,
        config: JetStreamConfig,
        run: Run[Any],
        gone: Callable[[Follower], TidemarkError],
        committed: Callable[[int], None],
    ):
        self._nats = nats
        self._followers = followers
        self._cache = cache
        self._config = config
        self._run = run
        self._gone = gone
        self._committed = committed

    def sync(self, follower: Follower) -> None:
        """Brings ``follower`` up to everything its stream held when this was called."""
        self._run(self._followers.sync(follower))

    def _look_again(self, follower: Follower, backoff: Backoff) -> bool:
        """Syncs ``follower`` within what is left of a call's budget; returns whether it did.

        When the cluster cannot say, the call waits its turn (``backoff``,
        which raises once the budget is spent) and tries again on the view
        it has: a publish of unknown fate is then found stored (the next
        try's expectation fails, and it looks again) or not.
        """
        syncing = self._followers.sync(follower)
        try:
            self._run(backoff.within(syncing, f"bringing {follower.log.name} up to date"))
        except EngineUnavailable as error:
            self._run(backoff.after(error))
            return False
        return True

    # --- stream records -----------------------------------------------------------

    def change(
        self, follower: Follower, decide: Decide[JetStreamSegment]
    ) -> tuple[int, Record | None]:
        """Publishes the stream record ``decide`` makes, with the segment messages it needs.

        A refusal decided on this server's view is looked at again on the
        cluster's before it stands. Returns the batch's last sequence and the
        record (0 and None when ``decide`` found nothing to store).
        """
        backoff = Backoff(self._config.unavailable_retry_s)
        log = follower.log
        synced = False
        while True:
            with log.locked():
                meta_seq = log.meta_seq
                last_seqs = {n: s.last_seq for n, s in log.entry.segments.items()}
                entry = log.snapshot()
            try:
                record = decide(entry)
            except TidemarkError:
                if synced:
                    raise
                # Refused by this server's view: look at the cluster's.
                synced = self._look_again(follower, backoff)
                continue
            if record is None:
                return 0, None
            messages = [
                (entry.segments[n].subject, b"", {**headers, **_expecting(last_seqs[n])})
                for n, headers in _segment_messages(entry, record)
            ]
            meta = meta_subject(self._config.namespace, follower.uid)
            messages.append((meta, b"", {**meta_headers(record), **_expecting(meta_seq)}))
            try:
                timeout_s = backoff.bounded(self._config.request_timeout_s)
                seq = self._run(self._nats.publish_atomic(messages, timeout_s))
            except WrongLastSequence:
                synced = self._look_again(follower, backoff)
                continue
            except EngineUnavailable as error:
                self._run(backoff.after(error))
                synced = self._look_again(follower, backoff)
                continue
            except StreamMissing:
                raise self._gone(follower) from None
            self._run(self._followers.caught_up(follower, seq, PUSH_GRACE_S))
            return seq, record

    # --- appends ------------------------------------------------------------------

    def check_batch(
        self, follower: Follower, target: JetStreamSegment, plan: PlanBatch[JetStreamSegment]
    ) -> None:
        """Refuses as :meth:`append` would (a gap, a seal), publishing nothing.

        A refusal on this server's view is looked at again on the cluster's.
        """
        try:
            plan(target)
        except FailedPreconditionError:
            self.sync(follower)
            plan(target)

    def append(
        self, follower: Follower, target: JetStreamSegment, plan: PlanBatch[JetStreamSegment]
    ) -> AppendResult:
        """Publishes the batch ``plan`` decides; returns once a quorum of replicas stored it.

        A gap or a seal refused on this server's view is looked at again on
        the cluster's (the writer's previous batch may have gone through
        another server). A publish of unknown fate that the next try finds
        stored under its token is answered as stored.
        """
        token = uuid.uuid4().hex
        backoff = Backoff(self._config.unavailable_retry_s)
        tried: tuple[int, int] | None = None  # (appended, duplicates) of a publish of unknown fate
        synced = False
        with target.publishing:
            while True:
                last_seq = target.last_seq  # first: the state read below is at least this one's
                try:
                    batch = plan(target)
                except FailedPreconditionError:
                    if synced:
                        raise
                    synced = self._look_again(follower, backoff)
                    continue
                if not batch.events:
                    mine = target.last_append_of(batch.writer_id)
                    if tried is not None and mine is not None and mine.token == token:
                        return AppendResult(mine.end, mine.time_ms, *tried)
                    return AppendResult(target.snapshot().committed_end, 0, 0, batch.duplicates)
                chunks = self._chunks(target, batch, token)
                tried = (len(batch.events), batch.duplicates)
                timeout_s = backoff.bounded(self._config.request_timeout_s)
                try:
                    stored = self._run(
                        self._publish_appends(follower, target, chunks, last_seq, timeout_s)
                    )
                except WrongLastSequence:
                    self._look_again(follower, backoff)
                    continue
                except EngineUnavailable as error:
                    self._run(backoff.after(error))
                    self._look_again(follower, backoff)
                    continue
                except StreamMissing:
                    raise self._gone(follower) from None
                self._committed(1)
                return AppendResult(stored.end, stored.time_ms, *tried)

    def _chunks(
        self, target: JetStreamSegment, batch: Batch, token: str
    ) -> list[tuple[bytes, Appended]]:
        return split_append(
            batch.events,
            batch.routing_keys,
            self._nats.max_payload - HEADER_ROOM,
            batch.first_event_number,
            target.snapshot().committed_end,
            target.next_time(self._config.clock.now_ms()),
            batch.writer_id,
            token,
        )

    async def _publish_appends(
        self,
        follower: Follower,
        target: JetStreamSegment,
        chunks: list[tuple[bytes, Appended]],
        last_seq: int,
        timeout_s: float,
    ) -> Appended:
        messages = []
        for i, (frames, message) in enumerate(chunks):
            headers = append_headers(
                message.time_ms,
                message.start,
                message.events,
                message.writer_id,
                message.last_event_number,
                message.token,
                message.checkpoints,
            )
            if i == 0:
                headers.update(_expecting(last_seq))
            messages.append((target.subject, frames, headers))
        seq = await self._nats.publish_atomic(messages, timeout_s)
        # An atomic batch takes consecutive sequences: the first is len - 1 before the last.
        for offset, (frames, message) in enumerate(chunks, seq - len(chunks) + 1):
            self._cache.put(follower.stream_name, offset, frames)
            follower.log.apply_published(offset, target.subject, message)
        return chunks[-1][1]

    # --- idle ticks ---------------------------------------------------------------

    def tick(self, now_ms: int, due: Callable[[JetStreamSegment], bool]) -> int:
        """Publishes a tick on every segment ``due`` says is idle; returns how many were stored.

        A segment an append of this server is publishing to is not idle. A
        tick expects the segment's last message, so of servers ticking one
        segment at once one does, and an append that came first makes the
        others' ticks fail harmlessly.
        """
        held: list[tuple[Follower, JetStreamSegment, int, int]] = []
        try:
            for follower in self._followers.all():
                for segment in follower.log.segments():
                    if not due(segment):
                        continue
                    if not segment.publishing.acquire(blocking=False):
                        continue  # an append is under way: not idle
                    held.append((follower, segment, segment.last_seq, segment.next_time(now_ms)))
            if not held:
                return 0
            return self._run(self._tick_all(held))
        finally:
            for _, segment, _, _ in held:
                segment.publishing.release()

    async def _tick_all(self, held: list[tuple[Follower, JetStreamSegment, int, int]]) -> int:
        outcomes = await asyncio.gather(
            *(self._tick(*tick) for tick in held), return_exceptions=True
        )
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures and len(failures) == len(outcomes):
            raise failures[0]
        return sum(1 for o in outcomes if o is True)

    async def _tick(
        self, follower: Follower, segment: JetStreamSegment, last_seq: int, time_ms: int
    ) -> bool:
        try:
            seq = await self._nats.publish(
                segment.subject, b"", tick_headers(time_ms), expected_last_subject_seq=last_seq
            )
        except (WrongLastSequence, SubjectBusy):
            return False  # written meantime or being written (an append, another tick)
        follower.log.apply_published(seq, segment.subject, TickMessage(time_ms))
        return True


def _segment_messages(
    entry: StreamEntry[JetStreamSegment], record: Record
) -> list[tuple[int, dict[str, str]]]:
    """The segment messages that go before ``record`` in its batch: (segment number, headers)."""
    if isinstance(record, StreamScaled | StreamSealed):
        return [
            (s.number, entry.segments[s.number].seal_marker_headers(s.time_ms))
            for s in record.sealed
        ]
    if isinstance(record, WatermarkAsserted | WritersTimedOut):
        fenced = {stamp.number for stamp in record.segments}
        if isinstance(record, WatermarkAsserted):
            fenced.update(number for number, _ in record.fences)
        return [(number, fence_headers()) for number in sorted(fenced)]
    return []


def _expecting(last_seq: int) -> dict[str, str]:
    return {"Nats-Expected-Last-Subject-Sequence": str(last_seq)}
