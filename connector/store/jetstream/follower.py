"""A server's follower of one Tidemark stream: its log kept in step with its JetStream stream.

Two ways keep :class:`~.log.StreamLog` current, both on the engine's loop:

- **push**: an ordered, headers-only consumer delivers every message as it
  is stored, so reads waiting at a tail wake as soon as another server
  writes (nats-py recreates the consumer from the last sequence when it
  misses heartbeats, as after the loss of the node that served it);
- **pull**: :meth:`Follower.catch_up` fetches what the log lacks up to a
  sequence the stream's leader named, so a call that must see everything
  written before it (an offset beyond what this server has seen, a
  description, a retried publish) does, whatever the consumer is doing.

The follower also serves the payloads of its segments' messages for reads,
from the server's cache or fetched from any replica (a replica behind the
leader is asked again, then the leader).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from nats.aio.msg import Msg

from connector.errors import FailedPreconditionError
from connector.store.jetstream.cache import PayloadCache
from connector.store.jetstream.engine import (
    Backoff,
    Engine,
    EngineUnavailable,
    Fetched,
    NoMessage,
)
from connector.store.jetstream.log import StreamLog
from connector.store.jetstream.messages import MSG_SIZE, decode_entry
from connector.store.jetstream.naming import stream_name, stream_subjects
from connector.store.jetstream.segment import JetStreamSegment

__all__ = ["Follower"]

_log = logging.getLogger(__name__)

#: How many messages one catch-up request asks for, and how many bytes at most.
_CATCH_UP_BATCH = 1_000
_CATCH_UP_BYTES = 16 * 1024 * 1024
#: What a read's fetch asks for beyond the messages it needs: those a reader reads next.
_READ_AHEAD_BYTES = 8 * 1024 * 1024
_READ_AHEAD_MESSAGES = 16
#: How many times a read asks replicas for messages it knows exist before asking the leader.
_REPLICA_TRIES = 3


class Follower:
    """Keeps one stream's log in step on this server; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        cache: PayloadCache,
        scope: str,
        stream: str,
        namespace: str,
        uid: str,
    ):
        self._engine = engine
        self._cache = cache
        self.uid = uid
        self.stream_name = stream_name(namespace, uid)
        self._subjects = stream_subjects(namespace, uid)
        self.log = StreamLog(scope, stream, namespace, uid, self.payloads)
        self._subscription: Any = None
        self._catching_up = asyncio.Lock()
        self._stopped = False

    # --- push -----------------------------------------------------------------------

    async def start(self) -> None:
        """Starts the push deliveries from the first message the log lacks (on the loop)."""
        self._subscription = await self._engine.follow(
            self.stream_name, self._subjects, self.log.applied + 1, self._delivered
        )

    async def _delivered(self, msg: Msg) -> None:
        if self._stopped:
            return
        try:
            seq = msg.metadata.sequence.stream
            headers = msg.headers or {}
            size = int(headers.get(MSG_SIZE, len(msg.data)))
            self._apply(seq, msg.subject, headers, size)
        except Exception:  # a delivery must never end the subscription
            _log.exception("%s: applying a delivered message failed", self.log.name)

    async def stop(self) -> None:
        """Stops the deliveries and ends every wait at the stream's tails (on the loop)."""
        self._stopped = True
        self.log.close()
        if self._subscription is not None:
            try:
                await self._subscription.unsubscribe()
            except Exception as error:  # the connection or the stream is gone already
                _log.debug("%s: unsubscribing: %s", self.log.name, error)

    # --- pull -----------------------------------------------------------------------

    async def last_seq(self) -> int:
        """The stream's last sequence now, as its leader says."""
        info = await self._engine.stream_info(self.stream_name)
        return int(info["state"]["last_seq"])

    async def sync(self, budget_s: float) -> None:
        """Brings the log up to everything stored in the stream before this call.

        Raises:
            EngineUnavailable: the cluster could not say, or give the
                messages, within ``budget_s``.
        """
        backoff = Backoff(budget_s)
        while True:
            try:
                await self.catch_up(await self.last_seq())
                return
            except EngineUnavailable as error:
                await backoff.after(error)

    async def catch_up(self, target: int) -> None:
        """Applies every message up to stream sequence ``target`` (which exists) in order."""
        if self.log.applied >= target:
            return
        async with self._catching_up:
            tries = 0
            while self.log.applied < target:
                before = self.log.applied
                fetched, _ = await self._engine.fetch_batch(
                    self.stream_name, before + 1, _CATCH_UP_BATCH, _CATCH_UP_BYTES
                )
                for message in fetched:
                    self._apply_fetched(message)
                if self.log.applied > before:
                    tries = 0
                    continue
                tries += 1
                if tries >= _REPLICA_TRIES:  # replicas behind: the leader has it
                    self._apply_fetched(await self._next_from_leader(before + 1))

    async def _next_from_leader(self, seq: int) -> Fetched:
        return await self._engine.next_message(self.stream_name, seq, self._subjects)

    def _apply_fetched(self, message: Fetched) -> None:
        if message.seq > self.log.applied and message.headers.get("Tm-Op") == "a":
            self._cache.put(self.stream_name, message.seq, message.data)
        self._apply(message.seq, message.subject, message.headers, len(message.data))

    def _apply(self, seq: int, subject: str, headers: Mapping[str, str], size: int) -> None:
        try:
            entry = decode_entry(headers, size)
        except FailedPreconditionError as error:
            _log.error("%s: skipping message %d: %s", self.log.name, seq, error)
            self.log.skip(seq)
            return
        self.log.apply_in_order(seq, subject, entry)

    # --- payloads for reads (any thread but the loop's) ---------------------------------

    def payloads(self, segment: JetStreamSegment, seqs: Sequence[int]) -> list[bytes]:
        """The payloads of ``segment``'s messages at ``seqs``, from the cache or the cluster."""
        found = {seq: self._cache.get(self.stream_name, seq) for seq in seqs}
        missing = [seq for seq, payload in found.items() if payload is None]
        if missing:
            budget = self._engine.config.unavailable_retry_s
            room = segment.bytes_of(missing) + _READ_AHEAD_BYTES
            found.update(self._engine.run(self._fetch(segment.subject, missing, room, budget)))
        return [found[seq] for seq in seqs]  # type: ignore[misc]

    async def _fetch(
        self, subject: str, seqs: list[int], room: int, budget_s: float
    ) -> dict[int, bytes]:
        """The payloads of messages ``seqs`` of ``subject``, and up to ``room`` bytes in all.

        The messages after the ones asked for that fit ``room`` come along
        and are kept in the cache: a reader reading on finds them there.
        """
        wanted = set(seqs)
        got: dict[int, bytes] = {}
        backoff = Backoff(budget_s)
        tries = 0
        while wanted - set(got):
            left = sorted(wanted - set(got))
            try:
                if tries < _REPLICA_TRIES:
                    # More than asked: ticks between come along, and the messages read next.
                    fetched, _ = await self._engine.fetch_batch(
                        self.stream_name, left[0], len(left) + _READ_AHEAD_MESSAGES, room, subject
                    )
                else:
                    fetched = [await self._engine.get_message(self.stream_name, left[0])]
            except EngineUnavailable as error:
                await backoff.after(error)
                continue
            except NoMessage:
                msg = f"{subject}: message {left[0]} is gone (purged by a truncation)"
                raise EngineUnavailable(msg) from None
            progressed = False
            for message in fetched:
                if message.data:  # an append's (ticks and markers have none)
                    self._cache.put(self.stream_name, message.seq, message.data)
                if message.seq in wanted:
                    got[message.seq] = message.data
                    progressed = True
            tries = 0 if progressed else tries + 1
        return got

    def __repr__(self) -> str:
        return f"Follower({self.log.name!r}, stream={self.stream_name!r})"
