"""A connection to a store server: one gRPC channel and typed calls.

Status codes come back as the domain errors of :mod:`connector.errors`.
Every call is retried while the server is unreachable, up to
``retry_timeout_s``; then :class:`StoreUnavailableError`. Reads and
descriptions are safe to repeat, and appends too (the store deduplicates them
by writer id and event number). A change whose answer was lost (creating a
scope or a stream, scaling, sealing, deleting, compare-and-set) may have been
made already, so its repeat's refusal is checked against what the store holds
(see :mod:`connector.client.repeats`): if the store holds exactly what the change
asked for, the change succeeded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from connector._proto import store_pb2 as _pb
from connector._proto import store_pb2_grpc as _pb_grpc
from connector._wire import (
    CAUSE_KEY,
    DAMAGED_OFFSET_KEY,
    ERROR_KIND_KEY,
    ERROR_STATUS,
    FIRST_OFFSET_KEY,
    GRPC_OPTIONS,
    NEXT_OFFSET_KEY,
    SEALED_SEGMENT_KEY,
    SUCCESSORS_KEY,
)
from connector.client.repeats import (
    scale_made,
    seal_made,
    state_untouched,
    state_written,
    stream_created,
)
from connector.errors import (
    AlreadyExistsError,
    DataLossError,
    FailedPreconditionError,
    FetchSessionError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    ResourceExhaustedError,
    SegmentSealedError,
    StoreUnavailableError,
    TidemarkError,
    TruncatedError,
)
from connector.model import (
    AppendResult,
    Assertion,
    AssertionResult,
    Fence,
    PlannedRead,
    PlanRequest,
    ReadResult,
    SegmentDescription,
    SegmentInfo,
    SegmentTail,
    StateValue,
    StreamDescription,
    StreamTails,
    TimeCount,
    TruncationResult,
    UnreadWork,
    WriterAssertion,
)
from connector.revisions import unknown_outcome
from connector.security.credentials import ClientCredentials, split_uri
from connector.security.probe import probe_transport, tls_failure

__all__ = ["StoreClient", "failure_error", "parse_uri", "read_result"]

_T = TypeVar("_T")
#: Sees the outcome (an answer, or the domain error about to be raised) of a call
#: repeated after a lost answer; returns the answer to give instead, or None.
_OnRepeat = Callable[[Any], Any]

_ERROR_OF_STATUS = {code: error_type for error_type, code in ERROR_STATUS}
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
# The channel retries connecting after 0.1 s, backing off to at most 1 s (gRPC's default grows
# to 120 s), so a client is back within about a second of its server.
_RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]
# What the server adds to a SegmentSealedError (see connector.server.status.error_metadata).


def parse_uri(uri: str) -> str:
    """The ``host:port`` of ``tidemark://host:port`` (or of a bare ``host:port``).

    A query after the address (``?tls_ca_file=...``) names credentials
    (:func:`connector.security.split_uri`) and is not part of the address.
    """
    address = uri.partition("?")[0].removeprefix("tidemark://") if isinstance(uri, str) else ""
    scheme, sep, _ = address.partition("://")
    if sep:
        msg = f"invalid store uri {uri!r}: the scheme is {scheme!r}, a store's is 'tidemark://'"
        raise InvalidArgumentError(msg)
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        msg = f"invalid store uri {uri!r}: expected 'tidemark://host:port'"
        raise InvalidArgumentError(msg)
    return address


_STATUS_OF_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def _number(text: str | None) -> int:
    """An offset sent in metadata; -1 when missing or not a number."""
    try:
        return int(text) if text is not None else -1
    except ValueError:
        return -1


def _domain_error(error: grpc.RpcError) -> TidemarkError:
    code = error.code()
    return _error_of(code, error.details() or code.name, dict(error.trailing_metadata() or ()))


def failure_error(failure: Any) -> TidemarkError:
    """The domain error a ``Failure`` message (one item of a call of many) stands for."""
    code = _STATUS_OF_NUMBER.get(failure.code, grpc.StatusCode.UNKNOWN)
    return _error_of(code, failure.message or code.name, dict(failure.details))


def _error_of(code: grpc.StatusCode, details: str, metadata: dict[str, Any]) -> TidemarkError:
    """The error of a failed call (or item) from its status code, message and metadata."""
    if metadata.get(ERROR_KIND_KEY) == FetchSessionError.__name__:
        return FetchSessionError(details)
    if metadata.get(ERROR_KIND_KEY) == TruncatedError.__name__:
        first = metadata.get(FIRST_OFFSET_KEY, "0")
        return TruncatedError(
            details, metadata.get(SEALED_SEGMENT_KEY, ""), int(first) if first.isdigit() else 0
        )
    if metadata.get(ERROR_KIND_KEY) == SegmentSealedError.__name__:
        successors = metadata.get(SUCCESSORS_KEY, "")
        return SegmentSealedError(
            details,
            metadata.get(SEALED_SEGMENT_KEY, ""),
            tuple(successors.split(",")) if successors else (),
        )
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and CAUSE_KEY in metadata:
        return ResourceExhaustedError(details, cause=metadata[CAUSE_KEY])
    if code == grpc.StatusCode.DATA_LOSS:
        return DataLossError(
            details,
            metadata.get(SEALED_SEGMENT_KEY, ""),
            _number(metadata.get(DAMAGED_OFFSET_KEY)),
            _number(metadata.get(NEXT_OFFSET_KEY)),
        )
    return _ERROR_OF_STATUS.get(code, TidemarkError)(details)


class StoreClient:
    """Typed calls to one store server; thread-safe, close it when done.

    Credentials (TLS files, a token file) come from the URI's query
    (``tidemark://host:port?tls_ca_file=ca.pem&token_file=token``) and from
    ``credentials``, whose fields win; see :mod:`connector.security.credentials`.
    A server that refuses the token raises :class:`UnauthenticatedError` or
    :class:`PermissionDeniedError`.
    """

    def __init__(
        self,
        uri: str,
        retry_timeout_s: float = 30.0,
        call_timeout_s: float = 60.0,
        credentials: ClientCredentials | None = None,
    ):
        self.uri = uri
        address = parse_uri(uri)
        _, in_uri = split_uri(uri)
        self.credentials = in_uri.merged(credentials) if credentials else in_uri
        tls = self.credentials.channel_credentials()
        options = [*GRPC_OPTIONS, *_RECONNECT_OPTIONS]
        self._channel = (
            grpc.secure_channel(address, tls, options=options)
            if tls is not None
            else grpc.insecure_channel(address, options=options)
        )
        self._metadata = self.credentials.call_metadata()
        self._stub = _pb_grpc.SegmentStoreStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._retry_timeout_s = retry_timeout_s
        self._call_timeout_s = call_timeout_s
        self._closed = False

    def _invoke(
        self,
        call: Callable[..., _T],
        request: Any,
        wait_s: float = 0,
        on_repeat: _OnRepeat | None = None,
    ) -> _T:
        deadline = time.monotonic() + self._retry_timeout_s
        reconnecting = False
        while True:
            timeout = self._call_timeout_s + wait_s
            if reconnecting:
                # Wait for the channel to be ready again (it retries connecting at least every
                # second), but no longer than the retry budget left: the call goes out the
                # moment the server is back, not after a sleep.
                timeout = min(timeout, max(deadline - time.monotonic(), 0.01) + wait_s)
            try:
                answer = call(
                    request,
                    timeout=timeout,
                    metadata=self._metadata,
                    wait_for_ready=reconnecting,
                )
            except grpc.RpcError as error:
                if error.code() in _RETRYABLE and time.monotonic() < deadline:
                    if not reconnecting and error.code() == grpc.StatusCode.UNAVAILABLE:
                        lasting = self._lasting_cause()
                        if lasting is not None:  # no retry mends it: say so now
                            raise StoreUnavailableError(lasting) from None
                    reconnecting = True
                    continue
                if reconnecting and error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    msg = (
                        f"the store at {parse_uri(self.uri)!r} could not be reached "
                        f"within {self._retry_timeout_s} s"
                    )
                    raise self._explained(StoreUnavailableError(msg)) from None
                failure = self._explained(_domain_error(error))
                settled = on_repeat(failure) if reconnecting and on_repeat else None
                if settled is None:
                    raise failure from None
                return settled
            settled = on_repeat(answer) if reconnecting and on_repeat else None
            return answer if settled is None else settled

    def _explained(self, error: TidemarkError) -> TidemarkError:
        """``error``, with the cause when the store could not be reached for a lasting one."""
        if not isinstance(error, StoreUnavailableError):
            return error
        lasting = self._lasting_cause()
        return error if lasting is None else StoreUnavailableError(f"{error} ({lasting})")

    def _lasting_cause(self) -> str | None:
        """Why the store cannot be reached, when a retry will not mend it; None otherwise.

        A transport mismatch (TLS on one side only) or a failing TLS handshake
        (see :mod:`connector.security.probe`).
        """
        address = parse_uri(self.uri)
        base = self.uri.partition("?")[0]
        transport = probe_transport(address)
        if transport == "tls" and not self.credentials.uses_tls:
            return (
                f"the server at {base!r} speaks TLS and this client plaintext: "
                "give the CA with tls_ca_file=... in the uri or in ClientCredentials"
            )
        if transport == "plaintext" and self.credentials.uses_tls:
            return (
                f"the server at {base!r} does not speak TLS and this client does: "
                "drop the TLS settings or start the server with --tls-cert/--tls-key"
            )
        if not self.credentials.uses_tls:
            return None
        failure = tls_failure(address, self.credentials)
        return (
            None if failure is None else f"TLS handshake with the store {base!r} failed: {failure}"
        )

    # --- streams --------------------------------------------------------------

    def create_scope(self, scope: str) -> None:
        """Creates a scope; AlreadyExistsError when it exists (not when a lost answer made it)."""

        def on_repeat(outcome: Any) -> Any:
            return _pb.CreateScopeResponse() if isinstance(outcome, AlreadyExistsError) else None

        request = _pb.CreateScopeRequest(scope=scope)
        self._invoke(self._stub.CreateScope, request, on_repeat=on_repeat)

    def create_stream(self, scope: str, stream: str, segment_count: int = 1) -> StreamDescription:
        """Creates a stream of ``segment_count`` segments.

        AlreadyExistsError when it exists, unless a repeat after a lost answer
        finds it exactly as this creation left it.
        """

        def on_repeat(outcome: Any) -> Any:
            if not isinstance(outcome, AlreadyExistsError):
                return None
            current = self._describe_message(scope, stream)
            return current if stream_created(_stream(current), segment_count) else None

        request = _pb.CreateStreamRequest(scope=scope, stream=stream, segment_count=segment_count)
        return _stream(self._invoke(self._stub.CreateStream, request, on_repeat=on_repeat))

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """Every segment of the stream."""
        return _stream(self._describe_message(scope, stream))

    def _describe_message(self, scope: str, stream: str) -> Any:
        request = _pb.DescribeStreamRequest(scope=scope, stream=stream)
        return self._invoke(self._stub.DescribeStream, request)

    def scale_stream(
        self, scope: str, stream: str, sealed_segments: Sequence[int], split_count: int = 0
    ) -> StreamDescription:
        """Splits one segment (``split_count`` >= 2) or merges adjacent ones (0).

        SegmentSealedError when a segment is sealed already, unless a repeat
        after a lost answer finds this very scale made.
        """
        numbers = list(sealed_segments)

        def on_repeat(outcome: Any) -> Any:
            if not isinstance(outcome, SegmentSealedError):
                return None
            current = self._describe_message(scope, stream)
            return current if scale_made(_stream(current), numbers, split_count) else None

        request = _pb.ScaleStreamRequest(
            scope=scope, stream=stream, sealed_segments=numbers, split_count=split_count
        )
        return _stream(self._invoke(self._stub.ScaleStream, request, on_repeat=on_repeat))

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals every open segment of the stream.

        FailedPreconditionError when it is sealed already, unless that is what
        a repeat after a lost answer finds.
        """

        def on_repeat(outcome: Any) -> Any:
            if not isinstance(outcome, FailedPreconditionError):
                return None
            current = self._describe_message(scope, stream)
            return current if seal_made(_stream(current)) else None

        request = _pb.SealStreamRequest(scope=scope, stream=stream)
        return _stream(self._invoke(self._stub.SealStream, request, on_repeat=on_repeat))

    def delete_stream(self, scope: str, stream: str) -> None:
        """Deletes a sealed stream and its data (FailedPreconditionError if not sealed).

        NotFoundError when there is no such stream, unless a repeat after a
        lost answer finds it gone.
        """

        def on_repeat(outcome: Any) -> Any:
            return _pb.DeleteStreamResponse() if isinstance(outcome, NotFoundError) else None

        request = _pb.DeleteStreamRequest(scope=scope, stream=stream)
        self._invoke(self._stub.DeleteStream, request, on_repeat=on_repeat)

    def delete_scope(self, scope: str) -> None:
        """Deletes an empty scope (FailedPreconditionError naming what it still holds).

        NotFoundError when there is no such scope, unless a repeat after a
        lost answer finds it gone.
        """

        def on_repeat(outcome: Any) -> Any:
            return _pb.DeleteScopeResponse() if isinstance(outcome, NotFoundError) else None

        self._invoke(
            self._stub.DeleteScope, _pb.DeleteScopeRequest(scope=scope), on_repeat=on_repeat
        )

    def truncate_stream(self, scope: str, stream: str, cut: Mapping[int, int]) -> TruncationResult:
        """Truncates the stream at ``cut`` (segment number -> offset); see the store's.

        Repeating it is harmless: a truncation at or before an earlier one changes nothing.
        """
        request = _pb.TruncateStreamRequest(scope=scope, stream=stream, cut=dict(cut))
        response = self._invoke(self._stub.TruncateStream, request)
        return TruncationResult(tuple(response.removed_segments), response.bytes_freed)

    def list_scopes(self) -> list[str]:
        """Every scope, sorted (needs ``read`` on every scope)."""
        return list(self._invoke(self._stub.ListScopes, _pb.ListScopesRequest()).scopes)

    def list_streams(self, scope: str) -> list[str]:
        """The streams of ``scope``, sorted; NotFoundError when there is no such scope."""
        request = _pb.ListStreamsRequest(scope=scope)
        return list(self._invoke(self._stub.ListStreams, request).streams)

    def list_state_keys(self, prefix: str) -> list[str]:
        """The state keys starting with ``prefix``, sorted."""
        request = _pb.ListStateKeysRequest(prefix=prefix)
        return list(self._invoke(self._stub.ListStateKeys, request).keys)

    # --- segments -------------------------------------------------------------

    def append(
        self,
        segment: str,
        writer_id: str,
        first_event_number: int,
        events: Sequence[bytes],
        routing_keys: Sequence[str] | None = None,
        discarded_from: int | None = None,
        assertion: Assertion | None = None,
        joining: Assertion | None = None,
    ) -> AppendResult:
        """Appends a batch; durable on return. Retried safely (the store deduplicates).

        ``routing_keys``, one per event (``""`` for none), are stored with the
        events. ``discarded_from`` announces a gap in the writer's numbers
        (see :meth:`SegmentStore.append`); ``assertion`` rides on the append
        after its events, ``joining`` before them
        (:class:`~connector.model.Assertion`). The result says whether the request
        was sent more than once (``resent``): then its duplicates may be its own
        events, stored by a send whose answer was lost.
        """
        request = _pb.AppendRequest(
            segment=segment,
            writer_id=writer_id,
            first_event_number=first_event_number,
            events=events,
            routing_keys=routing_keys or (),
            discarded_from=discarded_from,
            assertion=_append_assertion(assertion),
            joining=_append_assertion(joining),
        )
        resent = False

        def on_repeat(_outcome: Any) -> None:
            nonlocal resent
            resent = True

        response = self._invoke(self._stub.AppendEvents, request, on_repeat=on_repeat)
        return AppendResult(
            response.write_offset,
            response.ingestion_time,
            response.appended,
            response.duplicates,
            resent,
            None
            if assertion is None
            else AssertionResult(
                response.assertion_stored, tuple(response.assertion_segments), resent
            ),
            None
            if joining is None
            else AssertionResult(response.joining_stored, tuple(response.joining_segments), resent),
        )

    def assert_watermark(
        self,
        scope: str,
        stream: str,
        writer_id: str,
        number: int,
        event_time: int | None,
        fences: Mapping[str, Fence] | None = None,
    ) -> AssertionResult:
        """An assertion (``event_time``; None: idle) on the open segments; durable on return.

        Retried safely: a repeat of a stored assertion has its number and is
        a duplicate (``stored`` False, ``resent`` True). See
        :meth:`SegmentStore.assert_watermark`.
        """
        request = _pb.AssertWatermarkRequest(
            scope=scope,
            stream=stream,
            writer_id=writer_id,
            number=number,
            event_time=event_time,
            fences=[
                _pb.WriterFence(
                    segment=segment,
                    discarded_from=fence.discarded_from,
                    next_event_number=fence.next_event_number,
                )
                for segment, fence in sorted((fences or {}).items())
            ],
        )
        resent = False

        def on_repeat(_outcome: Any) -> None:
            nonlocal resent
            resent = True

        response = self._invoke(self._stub.AssertWatermark, request, on_repeat=on_repeat)
        return AssertionResult(response.stored, tuple(response.segments), resent)

    def read(
        self,
        segment: str,
        offset: int,
        max_bytes: int = 1024 * 1024,
        wait_ms: int = 0,
        known_watermark: int | None = None,
    ) -> ReadResult:
        """Reads whole events from ``offset``; see :meth:`SegmentStore.read`.

        The server answers with at most 32 MiB of events (``MAX_READ_BYTES``) whatever
        ``max_bytes`` asks, so that an answer fits a gRPC message; read on from ``next_offset``.

        Raises:
            DataLossError: the event at ``offset`` fails its checksum (the
                answer before stopped short of it); ``next_offset`` on the
                error is where its append ends. Never retried.
        """
        request = _pb.ReadRequest(
            segment=segment,
            offset=offset,
            max_bytes=max_bytes,
            wait_ms=wait_ms,
            known_watermark=known_watermark or 0,
            has_known_watermark=known_watermark is not None,
        )
        return read_result(self._invoke(self._stub.ReadSegment, request, wait_s=wait_ms / 1000))

    def plan_read(
        self,
        segment: str,
        offset: int,
        max_events: int | None = None,
        max_bytes: int | None = None,
        before_time: int | None = None,
        work_buckets: int = 0,
    ) -> PlannedRead:
        """Where a read from ``offset`` under the budget would stop (None: no limit).

        With ``before_time`` (epoch ms), it stops before the first event
        ingested at or after it. With ``work_buckets`` > 0 the plan carries
        the segment's :class:`~connector.model.UnreadWork` from ``offset``.
        See :meth:`SegmentStore.plan_read`; the store counts, no event is sent.
        """
        request = _pb.PlanReadRequest(
            segment=segment,
            offset=offset,
            max_events=max_events or 0,
            max_bytes=max_bytes or 0,
            before_time=before_time,
            work_buckets=work_buckets,
        )
        return _planned(self._invoke(self._stub.PlanRead, request))

    def plan_reads(self, plans: Sequence[PlanRequest]) -> list[PlannedRead | TidemarkError]:
        """Many :meth:`plan_read` calls in one: each plan, or the error it alone would raise.

        In the order asked; at most 16,384 plans a call (``MAX_ITEMS_PER_CALL``).
        """
        request = _pb.PlanReadsRequest(
            plans=[
                _pb.PlanReadRequest(
                    segment=p.segment,
                    offset=p.offset,
                    max_events=p.max_events or 0,
                    max_bytes=p.max_bytes or 0,
                    before_time=p.before_time,
                    work_buckets=p.work_buckets,
                )
                for p in plans
            ]
        )
        response = self._invoke(self._stub.PlanReads, request)
        return [
            _planned(o.plan) if o.WhichOneof("outcome") == "plan" else failure_error(o.error)
            for o in response.plans
        ]

    def describe_tails(
        self, streams: Sequence[str | StreamTails], wait_ms: int = 0
    ) -> list[StreamTails | TidemarkError]:
        """The tails of many streams' segments in one call, answered from the server's memory.

        Each of ``streams`` is ``"scope/stream"`` (every segment is answered)
        or the stream's previous answer (only the segments changed since are,
        unless the answer is ``complete``: see :class:`~connector.model.StreamTails`).
        With ``wait_ms``, an answer with nothing new waits until one of the
        streams changes, at most ``wait_ms`` (and at most 30 s). Returns, in
        the order asked, each stream's tails or the error describing it alone
        would raise (NotFoundError for a deleted stream). At most 16,384
        streams a call.
        """
        known = []
        for stream in streams:
            if isinstance(stream, StreamTails):
                known.append(
                    _pb.KnownTails(
                        scope=stream.scope,
                        stream=stream.stream,
                        incarnation=stream.incarnation,
                        version=stream.version,
                    )
                )
            else:
                scope, _, name = stream.partition("/")
                known.append(_pb.KnownTails(scope=scope, stream=name))
        request = _pb.DescribeTailsRequest(streams=known, wait_ms=wait_ms)
        response = self._invoke(self._stub.DescribeTails, request, wait_s=wait_ms / 1000)
        return [
            failure_error(t.error) if t.HasField("error") else _tails(t) for t in response.streams
        ]

    def read_segments(
        self, request: _pb.ReadSegmentsRequest, wait_ms: int = 0
    ) -> _pb.ReadSegmentsResponse:
        """One raw ReadSegments call; a fetch session's bookkeeping is :class:`FetchSession`'s.

        Read many segments through :class:`~connector.client.fetch_session.FetchSession`,
        which keeps the session's id, epoch and cursors and opens it again
        when the server lost it. Waits up to ``wait_ms`` beyond the call timeout.
        """
        return self._invoke(self._stub.ReadSegments, request, wait_s=wait_ms / 1000)

    def segment_info(self, segment: str) -> SegmentInfo:
        """A segment's attributes."""
        response = self._invoke(self._stub.GetSegmentInfo, _pb.SegmentInfoRequest(segment=segment))
        return SegmentInfo(
            segment=response.segment,
            creation_time=response.creation_time,
            last_write_time=response.last_write_time,
            write_offset=response.write_offset,
            sealed=response.sealed,
            watermark=response.watermark,
            key_low=response.key_low,
            key_high=response.key_high,
            first_offset=response.first_offset,
            event_time_watermark=_event_time(response),
            writers=tuple(
                WriterAssertion(w.writer_id, w.event_time, w.last_seen) for w in response.writers
            ),
        )

    # --- state ----------------------------------------------------------------

    def get_state(self, key: str, known_revision: int | None = None) -> StateValue:
        """The value under ``key`` (revision 0: none).

        With ``known_revision`` (the revision of the value the caller holds),
        an answer at that revision is ``unchanged`` and carries no value: a
        caller that polls a value moves no bytes of it while it stays put.
        """
        request = _pb.GetStateRequest(key=key, known_revision=known_revision)
        return _state(self._invoke(self._stub.GetState, request))

    def compare_and_set_state(
        self, key: str, expected_revision: int, value: bytes
    ) -> tuple[bool, StateValue]:
        """Writes ``value`` if the revision is ``expected_revision``; returns (written, current).

        A written value is not sent back (the server is asked to omit it; a
        server of an older release sends it anyway): ``current`` holds it all the same.

        A repeat after a lost answer that finds ``value`` stored at
        ``expected_revision + 1`` reports it written; one that finds the
        value moved on past that revision cannot tell (another writer may
        have replaced it since) and raises OutcomeUnknownError: never "not
        written" for what may have been written.
        """

        def on_repeat(outcome: Any) -> Any:
            if isinstance(outcome, TidemarkError) or outcome.written:
                return None
            current = _state(outcome.current)
            if state_written(current, expected_revision, value):
                return _pb.CompareAndSetStateResponse(written=True, current=outcome.current)
            if state_untouched(current, expected_revision):
                return None
            msg = unknown_outcome("a compare-and-set", key, expected_revision, current.revision)
            raise OutcomeUnknownError(msg)

        request = _pb.CompareAndSetStateRequest(
            key=key, expected_revision=expected_revision, value=value, omit_written_value=True
        )
        response = self._invoke(self._stub.CompareAndSetState, request, on_repeat=on_repeat)
        current = _state(response.current)
        if response.written and current.unchanged:  # not sent back: it is the value written
            current = StateValue(key, value, current.revision, current.server_time)
        return response.written, current

    def delete_state(self, key: str, expected_revision: int) -> tuple[bool, StateValue]:
        """Deletes the value under ``key`` if its revision is ``expected_revision``.

        Returns (deleted, current); ``current.revision`` is 0 once it is gone. A
        repeat after a lost answer that finds no value reports it deleted; one
        that finds a value stored again since raises OutcomeUnknownError.
        """

        def on_repeat(outcome: Any) -> Any:
            if isinstance(outcome, TidemarkError) or outcome.deleted:
                return None
            current = _state(outcome.current)
            if current.revision == 0:
                return _pb.DeleteStateResponse(deleted=True, current=outcome.current)
            if state_untouched(current, expected_revision):
                return None
            msg = unknown_outcome("a deletion", key, expected_revision, current.revision)
            raise OutcomeUnknownError(msg)

        request = _pb.DeleteStateRequest(key=key, expected_revision=expected_revision)
        response = self._invoke(self._stub.DeleteState, request, on_repeat=on_repeat)
        return response.deleted, _state(response.current)

    # --- health ---------------------------------------------------------------

    def health(self, service: str = "") -> str:
        """The server's answer to the standard gRPC health check: ``"SERVING"`` or another.

        For ``service`` ``""``: ``"SERVING"`` while the store takes writes,
        ``"NOT_SERVING"`` while it refuses them or is stopping. For
        ``connector._wire.DATA_SERVICE``: ``"NOT_SERVING"`` once a read
        met damaged data. Needs no token.

        Raises:
            NotFoundError: the server does not know ``service``.
        """
        request = health_pb2.HealthCheckRequest(service=service)
        answer = self._invoke(self._health.Check, request)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)

    # --- lifecycle ------------------------------------------------------------

    def close(self) -> None:
        """Closes the channel; closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self._channel.close()

    def __enter__(self) -> StoreClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StoreClient(uri={self.uri!r})"


def _stream(message: Any) -> StreamDescription:
    return StreamDescription(
        scope=message.scope,
        stream=message.stream,
        epoch=message.epoch,
        sealed=message.sealed,
        segments=tuple(
            SegmentDescription(
                segment=s.segment,
                key_low=s.key_low,
                key_high=s.key_high,
                epoch=s.epoch,
                sealed=s.sealed,
                creation_time=s.creation_time,
                predecessors=tuple(s.predecessors),
                successors=tuple(s.successors),
            )
            for s in message.segments
        ),
    )


def _append_assertion(assertion: Assertion | None) -> Any:
    """An assertion riding on an append as the request carries it (None: none rides)."""
    if assertion is None:
        return None
    return _pb.AppendAssertion(number=assertion.number, event_time=assertion.event_time)


def _event_time(message: Any, field: str = "event_time_watermark") -> int | None:
    """A message's event-time watermark ``field``; None when absent (no writer holds it)."""
    return getattr(message, field) if message.HasField(field) else None


def _state(message: Any) -> StateValue:
    return StateValue(
        message.key, message.value, message.revision, message.server_time, message.unchanged
    )


def read_result(message: Any) -> ReadResult:
    """A ``ReadResponse`` message as a :class:`ReadResult`."""
    return ReadResult(
        segment=message.segment,
        offset=message.offset,
        next_offset=message.next_offset,
        data=message.data,
        watermark=message.watermark,
        end_of_segment=message.end_of_segment,
        successors=tuple(message.successors),
        event_time_watermark=_event_time(message),
        event_time_floor=_event_time(message, "event_time_floor"),
        checksum=message.data_crc32 if message.HasField("data_crc32") else None,
    )


def _planned(message: Any) -> PlannedRead:
    return PlannedRead(
        segment=message.segment,
        offset=message.offset,
        next_offset=message.next_offset,
        events=message.events,
        watermark=message.watermark,
        end_of_segment=message.end_of_segment,
        at_tail=message.at_tail,
        successors=tuple(message.successors),
        event_time_watermark=_event_time(message),
        work=_work(message.work) if message.HasField("work") else None,
        first_ingestion_time=(
            message.first_ingestion_time if message.HasField("first_ingestion_time") else None
        ),
    )


def _work(message: Any) -> UnreadWork:
    return UnreadWork(
        unread=tuple(TimeCount(b.time, b.count) for b in message.unread),
        writers=tuple(TimeCount(b.time, b.count) for b in message.writers),
        tail_watermark=message.tail_watermark,
    )


def _tails(message: Any) -> StreamTails:
    return StreamTails(
        scope=message.scope,
        stream=message.stream,
        incarnation=message.incarnation,
        version=message.version,
        complete=message.complete,
        segments=tuple(
            SegmentTail(
                segment=t.segment,
                version=t.version,
                write_offset=t.write_offset,
                first_offset=t.first_offset,
                watermark=t.watermark,
                event_time_watermark=_event_time(t),
                sealed=t.sealed,
                last_write_time=t.last_write_time,
                creation_time=t.creation_time,
                key_low=t.key_low,
                key_high=t.key_high,
                epoch=t.epoch,
                predecessors=tuple(t.predecessors),
                successors=tuple(t.successors),
            )
            for t in message.segments
        ),
        server_time=message.server_time,
    )
