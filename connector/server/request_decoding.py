"""Requests whose bytes do not decode: refused with ``INVALID_ARGUMENT``, reported in one line.

gRPC decodes a request before its handler runs, and a decoding error there
becomes ``UNKNOWN`` with an ERROR traceback in the log: anyone who reaches
the port could fill the log. :class:`DecodingInterceptor` decodes every
request itself (of every service on the port: the store's, health,
reflection). One that does not decode is refused with ``INVALID_ARGUMENT``
naming the method, and :class:`UndecodableRequests` logs them in one
WARNING line at most every ``interval_s``, with how many there were.

With a token file the token interceptor runs first on the call's metadata,
so a call without a valid token is refused ``UNAUTHENTICATED`` before its
bytes are read (see :mod:`connector.security.interceptor`).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from connector.errors import quoted
from connector.ops.call_metrics import HandlerWrappings

__all__ = ["DecodingInterceptor", "UndecodableRequests"]

_log = logging.getLogger("connector.server")

_Handler = grpc.RpcMethodHandler


class _Undecodable:
    """What a request that failed to decode is handed on as, in place of a message."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error


class UndecodableRequests:
    """Counts requests that did not decode; logs them in one line at most every ``interval_s``.

    ``monotonic`` is the clock the interval is measured on (injected by tests).
    Used from the server's event loop only.
    """

    def __init__(self, interval_s: float = 60.0, monotonic: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self._monotonic = monotonic
        self._last_line: float | None = None
        self._unreported = 0
        #: Every request refused as undecodable since the server started.
        self.total = 0

    def report(self, method: str, peer: str, error: Exception) -> None:
        """Counts one undecodable request; logs a line if none was logged in the interval."""
        self.total += 1
        self._unreported += 1
        now = self._monotonic()
        if self._last_line is not None and now - self._last_line < self.interval_s:
            return
        _log.warning(
            "refused %d request(s) that did not decode since the last such line (one at most "
            "every %g s); the latest: %s from %s: %s",
            self._unreported,
            self.interval_s,
            quoted(method, 120),
            quoted(peer, 80),
            quoted(str(error), 200),
        )
        self._unreported = 0
        self._last_line = now


class DecodingInterceptor(grpc.aio.ServerInterceptor):
    """Decodes each request itself: one that does not decode gets ``INVALID_ARGUMENT``."""

    def __init__(self, reporter: UndecodableRequests | None = None):
        self.reporter = reporter or UndecodableRequests()
        self._wrapped = HandlerWrappings(self._wrap)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[_Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> _Handler | None:
        """The handler, decoding its requests so that a failure is a refusal, not an error."""
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        return self._wrapped.of(handler_call_details.method, handler)

    def _wrap(self, method: str, handler: _Handler) -> _Handler:
        """``handler`` decoding its requests itself; see :meth:`intercept_service`."""
        decode = handler.request_deserializer

        def tolerant(raw: bytes) -> Any:
            try:
                return decode(raw)
            except Exception as error:  # noqa: BLE001 - whatever the bytes, never UNKNOWN
                return _Undecodable(error)

        refuse = self._refuser(method)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                _unary(handler.unary_unary, refuse), tolerant, handler.response_serializer
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                _unary_stream(handler.unary_stream, refuse), tolerant, handler.response_serializer
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                _stream_unary(handler.stream_unary, refuse), tolerant, handler.response_serializer
            )
        return grpc.stream_stream_rpc_method_handler(
            _stream_stream(handler.stream_stream, refuse), tolerant, handler.response_serializer
        )

    def _refuser(self, method: str) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]:
        """Refuses an undecodable request of ``method``; lets anything else through."""

        async def refuse_if_undecodable(request: Any, context: grpc.aio.ServicerContext) -> None:
            if isinstance(request, _Undecodable):
                self.reporter.report(method, context.peer(), request.error)
                name = method.rpartition("/")[2]
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"the request to {name} does not decode as its message type",
                )

        return refuse_if_undecodable


_Refuse = Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]


async def _answer(answer: Any) -> Any:
    return await answer if inspect.isawaitable(answer) else answer


async def _each(
    requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, refuse: _Refuse
) -> AsyncIterator[Any]:
    async for request in requests:
        await refuse(request, context)
        yield request


def _unary(inner: Callable[..., Any], refuse: _Refuse) -> Callable[..., Any]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await refuse(request, context)
        return await _answer(inner(request, context))

    return call


def _unary_stream(inner: Callable[..., Any], refuse: _Refuse) -> Callable[..., Any]:
    # The wrapper yields if ``inner`` does, and otherwise lets it write through the context:
    # gRPC refuses a call that does both.
    if inspect.isasyncgenfunction(inner):

        async def generate(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await refuse(request, context)
            async for item in inner(request, context):
                yield item

        return generate

    async def write(request: Any, context: grpc.aio.ServicerContext) -> None:
        await refuse(request, context)
        await _answer(inner(request, context))

    return write


def _stream_unary(inner: Callable[..., Any], refuse: _Refuse) -> Callable[..., Any]:
    async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        return await _answer(inner(_each(requests, context, refuse), context))

    return call


def _stream_stream(inner: Callable[..., Any], refuse: _Refuse) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(inner):

        async def generate(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            async for item in inner(_each(requests, context, refuse), context):
                yield item

        return generate

    async def write(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> None:
        await _answer(inner(_each(requests, context, refuse), context))

    return write
