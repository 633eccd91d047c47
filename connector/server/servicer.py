"""The store's gRPC service on an event loop: a thin async servicer over a :class:`Storage`.

The servicer converts messages to domain calls and domain errors to status
codes; it holds no state of its own beyond the parked reads and the fetch
sessions. The store's calls block (a change waits for its group's fsync), so
each runs on a thread pool, one for changes and one for reads: an append
never queues behind reads, nor a read behind appends. What the store has in
memory at once is answered on the loop, without the trip to a pool thread
and back (which costs more than the answer): a ``GetState`` the store can
answer without waiting, a fetch session's call with nothing to apply and no
segment changed. A read that waits at a segment's tail holds no thread at
all: it parks on the event loop (:mod:`.parked_reads`) until the store says
there is something to answer, the wait ends, or the client goes away, which
withdraws it at once. The calls over many segments (DescribeTails,
ReadSegments, PlanReads) are answered by :mod:`.many_segments`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc

from connector._proto import store_pb2 as _pb
from connector._proto import store_pb2_grpc as _pb_grpc
from connector._wire import MAX_READ_BYTES
from connector.errors import TidemarkError
from connector.model import Assertion, Fence, ReadResult
from connector.ops import StoreMetrics
from connector.server.fetch_sessions import FetchSessions
from connector.server.many_segments import ManySegments
from connector.server.messages import plan_message, read_message, state_message, stream_message
from connector.server.parked_reads import ParkedReads
from connector.server.status import error_metadata, shortened, status_of
from connector.store import Storage

__all__ = ["SegmentStoreServicer"]

_Result = TypeVar("_Result")


async def _abort(context: grpc.aio.ServicerContext, error: TidemarkError) -> None:
    context.set_trailing_metadata(error_metadata(error))
    await context.abort(status_of(error), shortened(str(error)))


def _nothing_to_answer_yet(result: ReadResult, known_watermark: int) -> bool:
    """Whether a read at ``result.offset`` would wait: no data, no end, no higher watermark."""
    return not result.data and not result.end_of_segment and result.watermark <= known_watermark


def _riding(request: Any, field: str = "assertion") -> Assertion | None:
    """The assertion riding on an append request in ``field``, if any."""
    if not request.HasField(field):
        return None
    riding = getattr(request, field)
    event_time = riding.event_time if riding.HasField("event_time") else None
    return Assertion(riding.number, event_time)


class SegmentStoreServicer(_pb_grpc.SegmentStoreServicer):
    """Answers the SegmentStore service from a :class:`Storage`, counting in ``metrics``.

    ``changes`` runs the calls that change the store, ``reads`` the others.
    """

    def __init__(
        self,
        store: Storage,
        metrics: StoreMetrics,
        changes: ThreadPoolExecutor,
        reads: ThreadPoolExecutor,
        parked: ParkedReads,
        sessions: FetchSessions | None = None,
    ):
        self._store = store
        self._metrics = metrics
        self._changes = changes
        self._reads = reads
        self._parked = parked
        self._many = ManySegments(store, self._look, parked, sessions or FetchSessions(), _abort)

    async def _run(
        self,
        context: grpc.aio.ServicerContext,
        pool: ThreadPoolExecutor,
        work: Callable[..., _Result],
        *args: Any,
    ) -> _Result:
        """``work(*args)`` on ``pool``; a domain error aborts the call with its status."""
        try:
            return await asyncio.get_running_loop().run_in_executor(
                pool, functools.partial(work, *args)
            )
        except TidemarkError as error:
            self._metrics.data_loss_met(error)
            await _abort(context, error)
            raise  # unreachable: abort raises

    async def _change(
        self, context: grpc.aio.ServicerContext, work: Callable[..., _Result], *args: Any
    ) -> _Result:
        return await self._run(context, self._changes, work, *args)

    async def _look(
        self, context: grpc.aio.ServicerContext, work: Callable[..., _Result], *args: Any
    ) -> _Result:
        return await self._run(context, self._reads, work, *args)

    async def CreateScope(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        await self._change(context, self._store.create_scope, request.scope)
        return _pb.CreateScopeResponse(scope=request.scope)

    async def CreateStream(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        store = self._store
        return stream_message(
            await self._change(
                context, store.create_stream, request.scope, request.stream, request.segment_count
            )
        )

    async def DescribeStream(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        store = self._store
        return stream_message(
            await self._look(context, store.describe_stream, request.scope, request.stream)
        )

    async def ScaleStream(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        description = await self._change(
            context,
            self._store.scale_stream,
            request.scope,
            request.stream,
            list(request.sealed_segments),
            request.split_count,
        )
        return stream_message(description)

    async def SealStream(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        store = self._store
        return stream_message(
            await self._change(context, store.seal_stream, request.scope, request.stream)
        )

    async def DeleteStream(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        await self._change(context, self._store.delete_stream, request.scope, request.stream)
        return _pb.DeleteStreamResponse()

    async def DeleteScope(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        await self._change(context, self._store.delete_scope, request.scope)
        return _pb.DeleteScopeResponse()

    async def AppendEvents(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        with self._metrics.timing(self._metrics.append_seconds):
            result = await self._change(
                context,
                self._store.append,
                request.segment,
                request.writer_id,
                request.first_event_number,
                request.events,
                request.routing_keys,
                request.discarded_from if request.HasField("discarded_from") else None,
                _riding(request),
                _riding(request, "joining"),
            )
        self._metrics.appended(request.segment, request.events[result.duplicates :])
        return _pb.AppendResponse(
            write_offset=result.write_offset,
            ingestion_time=result.ingestion_time,
            appended=result.appended,
            duplicates=result.duplicates,
            assertion_stored=result.assertion is not None and result.assertion.stored,
            assertion_segments=() if result.assertion is None else result.assertion.segments,
            joining_stored=result.joining is not None and result.joining.stored,
            joining_segments=() if result.joining is None else result.joining.segments,
        )

    async def AssertWatermark(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        fences = {f.segment: Fence(f.discarded_from, f.next_event_number) for f in request.fences}
        result = await self._change(
            context,
            self._store.assert_watermark,
            request.scope,
            request.stream,
            request.writer_id,
            request.number,
            request.event_time if request.HasField("event_time") else None,
            fences,
        )
        return _pb.AssertWatermarkResponse(stored=result.stored, segments=result.segments)

    async def ReadSegment(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        known = request.known_watermark if request.has_known_watermark else None
        # Larger answers would not fit a message; the reader asks again from next_offset.
        max_bytes = min(request.max_bytes, MAX_READ_BYTES)
        read = functools.partial(self._store.read, request.segment, request.offset, max_bytes, 0)
        with self._metrics.timing(self._metrics.read_seconds):
            result = await self._look(context, read, known)
            # The watermark this read started from: what a later rise is measured against.
            known = result.watermark if known is None else known
            if request.wait_ms > 0 and _nothing_to_answer_yet(result, known):
                await self._park(context, request.segment, request.offset, known, request.wait_ms)
                result = await self._look(context, read, known)
        return read_message(result)

    async def _park(
        self,
        context: grpc.aio.ServicerContext,
        segment: str,
        offset: int,
        known_watermark: int,
        wait_ms: int,
    ) -> None:
        """Waits, holding no thread, until a read at ``offset`` has something to answer.

        That is: data past ``offset``, a seal, a watermark above
        ``known_watermark``, a truncation, or the server stopping; at most
        ``wait_ms``. A cancelled call withdraws its wait at once.
        """
        loop = asyncio.get_running_loop()
        try:
            with self._parked.parked(context.peer()) as woken:
                withdraw = self._store.watch_tail(
                    segment, offset, known_watermark, lambda: loop.call_soon_threadsafe(woken.set)
                )
                if withdraw is None:
                    return
                try:
                    await asyncio.wait_for(woken.wait(), wait_ms / 1000)
                except TimeoutError:
                    pass
                finally:
                    withdraw()
        except TidemarkError as error:
            await _abort(context, error)

    async def PlanRead(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        plan = await self._look(
            context,
            self._store.plan_read,
            request.segment,
            request.offset,
            request.max_events or None,
            request.max_bytes or None,
            request.before_time if request.HasField("before_time") else None,
            request.work_buckets,
        )
        return plan_message(plan)

    async def PlanReads(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        return await self._many.plan_reads(request, context)

    async def DescribeTails(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        return await self._many.describe_tails(request, context)

    async def ReadSegments(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        return await self._many.read_segments(request, context)

    async def TruncateStream(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        result = await self._change(
            context, self._store.truncate_stream, request.scope, request.stream, dict(request.cut)
        )
        return _pb.TruncateStreamResponse(
            removed_segments=result.removed_segments, bytes_freed=result.bytes_freed
        )

    async def ListScopes(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        return _pb.ListScopesResponse(scopes=await self._look(context, self._store.scopes))

    async def ListStreams(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        streams = await self._look(context, self._store.list_streams, request.scope)
        return _pb.ListStreamsResponse(streams=streams)

    async def ListStateKeys(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        keys = await self._look(context, self._store.state_keys, request.prefix)
        return _pb.ListStateKeysResponse(keys=keys)

    async def GetSegmentInfo(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        info = await self._look(context, self._store.segment_info, request.segment)
        return _pb.SegmentInfo(
            segment=info.segment,
            creation_time=info.creation_time,
            last_write_time=info.last_write_time,
            write_offset=info.write_offset,
            sealed=info.sealed,
            watermark=info.watermark,
            key_low=info.key_low,
            key_high=info.key_high,
            first_offset=info.first_offset,
            event_time_watermark=info.event_time_watermark,
            writers=[
                _pb.WriterAssertion(
                    writer_id=w.writer_id, event_time=w.event_time, last_seen=w.last_seen
                )
                for w in info.writers
            ],
        )

    async def GetState(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """A state value; from memory on the loop when the store has it at once (no thread hop).

        A reader group's idle sync is this call, answered ``unchanged``: a
        trip to the read pool and back would cost more than the answer.
        """
        known = request.known_revision if request.HasField("known_revision") else None
        try:
            value = self._store.get_state_at_once(request.key, known)
        except TidemarkError as error:
            await _abort(context, error)
            raise  # unreachable: abort raises
        if value is None:
            value = await self._look(context, self._store.get_state, request.key, known)
        self._metrics.state_read(value)
        return state_message(value)

    async def CompareAndSetState(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        written, current = await self._change(
            context,
            self._store.compare_and_set_state,
            request.key,
            request.expected_revision,
            request.value,
        )
        stored = state_message(current)
        if written and request.omit_written_value:  # the caller sent the value
            stored.value, stored.unchanged = b"", True
        return _pb.CompareAndSetStateResponse(written=written, current=stored)

    async def DeleteState(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: D102
        deleted, current = await self._change(
            context, self._store.delete_state, request.key, request.expected_revision
        )
        return _pb.DeleteStateResponse(deleted=deleted, current=state_message(current))
