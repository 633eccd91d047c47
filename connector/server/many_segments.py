"""The calls over many segments: DescribeTails, ReadSegments and PlanReads, on the event loop.

Each answers many streams or segments in one call, and each item fails on
its own (a :class:`~connector._proto.store_pb2.Failure` with the status, message
and metadata its own call would have had); only a malformed or over-limit
request, a fetch session's broken sequence, or a store that cannot be
reached (UNAVAILABLE, which clients retry) fails the whole call.

A call that has nothing new to say waits once, parked on the loop without a
thread (:class:`~connector.server.parked_reads.ParkedReads`, a call counting
once against its connection's cap), until a listener of what it named (a
stream's changes for DescribeTails, the fetch session's segments for
ReadSegments) wakes it, or its wait (at most ``MAX_WAIT_MS``) ends. The
store's work runs on the read pool; the listeners run on the store's threads
and only schedule the wake-up. When nothing changes, nothing here runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc

from connector._proto import store_pb2 as _pb
from connector._wire import (
    DEFAULT_FETCH_BYTES,
    DEFAULT_FETCH_BYTES_PER_SEGMENT,
    MAX_FETCH_BYTES,
    MAX_ITEMS_PER_CALL,
    MAX_READS_PER_ANSWER,
    MAX_WAIT_MS,
)
from connector.errors import (
    FetchSessionError,
    InvalidArgumentError,
    PermissionDeniedError,
    ResourceExhaustedError,
    StoreUnavailableError,
    TidemarkError,
    quoted,
)
from connector.model import FetchPosition, StreamTails
from connector.security import Need, Right, caller
from connector.server.fetch_sessions import (
    CursorRequest,
    FetchAnswer,
    FetchSession,
    FetchSessions,
    Owner,
)
from connector.server.messages import failure_message, plan_message, read_message, tails_message
from connector.server.parked_reads import ParkedReads
from connector.store import Storage

__all__ = ["ManySegments"]

_T = TypeVar("_T")

#: Runs a store call on the read pool; a domain error aborts the gRPC call with its status.
Look = Callable[..., Awaitable[Any]]


def _waited_ms(wait_ms: int) -> int:
    return max(0, min(wait_ms, MAX_WAIT_MS))


def _check_count(rpc: str, what: str, count: int) -> None:
    if count > MAX_ITEMS_PER_CALL:
        msg = (
            f"a {rpc} call names {count} {what}, over the limit of {MAX_ITEMS_PER_CALL} "
            "per call: split it"
        )
        raise ResourceExhaustedError(msg, cause="batch_limit")


def _budget(name: str, value: int, default: int, most: int) -> int:
    if value < 0:
        msg = f"{name} must be >= 0 (0: {default}), got {value!r}"
        raise InvalidArgumentError(msg)
    return min(value or default, most)


def _cursor(message: Any) -> CursorRequest:
    if not message.HasField("offset"):
        return CursorRequest(message.segment)
    known = message.known_watermark if message.HasField("known_watermark") else None
    event_time = None
    if known is not None and message.HasField("known_event_time_watermark"):
        event_time = message.known_event_time_watermark
    return CursorRequest(message.segment, FetchPosition(message.offset, known, event_time))


def _check_names(cursors: Sequence[CursorRequest], released: Sequence[str]) -> None:
    """Refuses a segment named twice among the cursors, or both moved and released."""
    seen: set[str] = set()
    for cursor in cursors:
        if cursor.segment in seen:
            msg = f"segment {quoted(cursor.segment)} is named twice among the cursors"
            raise InvalidArgumentError(msg)
        seen.add(cursor.segment)
    both = seen.intersection(released)
    if both:
        msg = f"segment {quoted(min(both))} is both given a cursor and released"
        raise InvalidArgumentError(msg)


def _empty(tails: Sequence[StreamTails | TidemarkError]) -> bool:
    """Whether no stream has anything to say: nothing changed, nothing failed."""
    return all(isinstance(t, StreamTails) and not t.complete and not t.segments for t in tails)


class ManySegments:
    """Answers the calls over many segments from ``store``; see the module docstring."""

    def __init__(
        self,
        store: Storage,
        look: Look,
        parked: ParkedReads,
        sessions: FetchSessions,
        abort: Callable[[grpc.aio.ServicerContext, TidemarkError], Awaitable[None]],
    ):
        self._store = store
        self._look = look
        self._parked = parked
        self._sessions = sessions
        self._abort = abort

    # --- DescribeTails --------------------------------------------------------------

    async def describe_tails(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Every stream's tails since what the caller knew; waits once when nothing changed."""
        known = [(k.scope, k.stream, k.incarnation, k.version) for k in request.streams]
        try:
            _check_count("DescribeTails", "streams", len(known))
        except TidemarkError as error:
            await self._abort(context, error)
        wait_ms = _waited_ms(request.wait_ms)
        if wait_ms == 0:
            tails = await self._look(context, self._describe, known)
            return self._tails_response(known, tails)
        try:
            return await self._describe_waiting(context, known, wait_ms)
        except TidemarkError as error:  # too many calls parked on this connection
            await self._abort(context, error)
            raise  # unreachable: abort raises

    async def _describe_waiting(
        self,
        context: grpc.aio.ServicerContext,
        known: Sequence[tuple[str, str, int, int]],
        wait_ms: int,
    ) -> Any:
        loop = asyncio.get_running_loop()
        with self._parked.parked(context.peer(), "DescribeTails") as woken:
            fired = [False]

            def wake() -> None:  # on the store's thread: O(1), schedules the wake-up once
                if not fired[0]:
                    fired[0] = True
                    loop.call_soon_threadsafe(woken.set)

            # Listening first: a change between the description and the wait still wakes it.
            stops = await self._look(context, self._listen, known, wake)
            try:
                tails = await self._look(context, self._describe, known)
                if _empty(tails):
                    try:
                        await asyncio.wait_for(woken.wait(), wait_ms / 1000)
                    except TimeoutError:
                        return self._tails_response(known, tails)
                    tails = await self._look(context, self._describe, known)
            finally:
                for stop in stops:
                    stop()
        return self._tails_response(known, tails)

    def _describe(
        self, known: Sequence[tuple[str, str, int, int]]
    ) -> list[StreamTails | TidemarkError]:
        tails: list[StreamTails | TidemarkError] = []
        for scope, stream, incarnation, version in known:
            try:
                tails.append(self._store.describe_tails(scope, stream, incarnation, version))
            except StoreUnavailableError:
                raise  # the whole call: a client retries it
            except TidemarkError as error:
                tails.append(error)
        return tails

    def _listen(
        self, known: Sequence[tuple[str, str, int, int]], wake: Callable[[], None]
    ) -> list[Callable[[], None]]:
        stops = []
        for scope, stream, _, _ in known:
            try:
                stops.append(self._store.listen_stream(scope, stream, wake))
            except TidemarkError:
                continue  # answered with its error, which ends the wait anyway
        return stops

    @staticmethod
    def _tails_response(
        known: Sequence[tuple[str, str, int, int]], tails: Sequence[StreamTails | TidemarkError]
    ) -> Any:
        streams = []
        for (scope, stream, _, _), answer in zip(known, tails, strict=True):
            if isinstance(answer, StreamTails):
                streams.append(tails_message(answer))
            else:
                failure = failure_message(answer)
                streams.append(_pb.StreamTails(scope=scope, stream=stream, error=failure))
        return _pb.DescribeTailsResponse(streams=streams)

    # --- PlanReads ------------------------------------------------------------------

    async def plan_reads(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Each plan answered or refused on its own, in the order asked."""
        try:
            _check_count("PlanReads", "plans", len(request.plans))
        except TidemarkError as error:
            await self._abort(context, error)
        outcomes = await self._look(context, self._plan, list(request.plans))
        return _pb.PlanReadsResponse(plans=outcomes)

    def _plan(self, plans: Sequence[Any]) -> list[Any]:
        outcomes = []
        for request in plans:
            try:
                plan = self._store.plan_read(
                    request.segment,
                    request.offset,
                    request.max_events or None,
                    request.max_bytes or None,
                    request.before_time if request.HasField("before_time") else None,
                    request.work_buckets,
                )
            except StoreUnavailableError:
                raise  # the whole call: a client retries it
            except TidemarkError as error:
                outcomes.append(_pb.PlanReadOutcome(error=failure_message(error)))
                continue
            outcomes.append(_pb.PlanReadOutcome(plan=plan_message(plan)))
        return outcomes

    # --- ReadSegments ---------------------------------------------------------------

    async def read_segments(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """One call of a fetch session: its changes applied, then what is new, waited for once."""
        owner: Owner = (context.peer(), getattr(caller(), "name", None))
        cursors = [_cursor(c) for c in request.cursors]
        released = list(dict.fromkeys(request.released))
        try:
            _check_names(cursors, released)
            max_bytes = _budget(
                "max_bytes", request.max_bytes, DEFAULT_FETCH_BYTES, MAX_FETCH_BYTES
            )
            per_segment = _budget(
                "max_bytes_per_segment",
                request.max_bytes_per_segment,
                DEFAULT_FETCH_BYTES_PER_SEGMENT,
                max_bytes,
            )
            if request.close:
                self._sessions.close_id(owner, request.session_id)
                return _pb.ReadSegmentsResponse(
                    session_id=request.session_id, session_epoch=request.session_epoch
                )
            added = [c.segment for c in cursors if c.position is not None]
            session = self._sessions.begin(
                owner, request.session_id, request.session_epoch, added, released
            )
        except TidemarkError as error:
            await self._abort(context, error)
            raise  # unreachable: abort raises
        try:
            answer = FetchAnswer()
            if cursors or released:  # else nothing to apply: no trip to the read pool
                answer.failures = await self._look(
                    context, session.apply, self._store, cursors, released
                )
            found = await self._collect(context, session, max_bytes, per_segment, request.wait_ms)
            answer.reads, answer.failures = found.reads, answer.failures + found.failures
            self._withhold_unreadable(session, answer)
            if session.closed:
                msg = f"fetch session {session.id} was closed while answering (a request came)"
                raise FetchSessionError(msg)
        except TidemarkError as error:
            self._sessions.close(session)
            await self._abort(context, error)
        except BaseException:
            self._sessions.close(session)
            raise
        finally:
            self._sessions.finish(session)
        return _pb.ReadSegmentsResponse(
            session_id=session.id,
            session_epoch=session.epoch,
            reads=[read_message(r) for r in answer.reads],
            failures=[
                _pb.SegmentFailure(segment=name, error=failure_message(error))
                for name, error in answer.failures
            ],
        )

    async def _collect(
        self,
        context: grpc.aio.ServicerContext,
        session: FetchSession,
        max_bytes: int,
        per_segment: int,
        wait_ms: int,
    ) -> FetchAnswer:
        """What is new in the session; waits (parked, once per change) up to ``wait_ms`` for it.

        A session with no segment changed since the last look has nothing to
        read: it is answered (or parked) without a trip to the read pool.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _waited_ms(wait_ms) / 1000
        while True:
            answer = FetchAnswer()
            if session.changed:
                answer = await self._look(
                    context, session.collect, max_bytes, per_segment, MAX_READS_PER_ANSWER
                )
            left = deadline - loop.time()
            if answer or left <= 0 or session.closed or self._parked.closed:
                return answer
            with self._parked.parked(context.peer(), "ReadSegments") as woken:
                if not session.park(lambda: loop.call_soon_threadsafe(woken.set)):
                    continue  # something changed already: look again
                try:
                    await asyncio.wait_for(woken.wait(), left)
                except TimeoutError:
                    pass
                finally:
                    session.unpark()

    @staticmethod
    def _withhold_unreadable(session: FetchSession, answer: FetchAnswer) -> None:
        """Turns what the caller may no longer read (a token changed) into refusals."""
        who = caller()
        if who is None:
            return

        def allowed(segment: str) -> bool:
            return who.allows(Need(Right.READ, segment.split("/", 1)[0] or "*"))

        refused = [r.segment for r in answer.reads if not allowed(r.segment)]
        refused += [name for name, _ in answer.failures if not allowed(name)]
        if not refused:
            return
        answer.reads = [r for r in answer.reads if allowed(r.segment)]
        answer.failures = [(n, e) for n, e in answer.failures if allowed(n)]
        for name in refused:
            session.drop(name)
            msg = f"token {who.name!r} has no 'read' right on segment {quoted(name)}"
            answer.failures.append((name, PermissionDeniedError(msg)))
