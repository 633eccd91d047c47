"""Every call the server answers, counted by method and status code, and refusals by cause.

:class:`CallMetricsInterceptor` is the server's outermost interceptor, so it
sees every unary call's final status, also of calls that the token or the
decoding interceptor refused before the store saw them. A refusal is a call
the server turned down rather than answered: ``UNAUTHENTICATED``,
``PERMISSION_DENIED``, ``INVALID_ARGUMENT`` and ``RESOURCE_EXHAUSTED``, the
last by the limit it met (:attr:`ResourceExhaustedError.cause
<connector.errors.ResourceExhaustedError>`, which the servicer puts in the
call's trailing metadata). Streaming calls (health ``Watch``, reflection)
are not counted.

Per call it costs two dictionary lookups: the wrapped handler is made once
per method (while the handler under it stays the same object), and each
{service, method, code} child counter is looked up once, not through
``labels()`` (a lock and a label check) on every call.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from prometheus_client import Counter

from connector._wire import CAUSE_KEY

__all__ = ["CallMetricsInterceptor", "HandlerWrappings", "refusal_cause"]

_REFUSALS = {
    grpc.StatusCode.UNAUTHENTICATED: "unauthenticated",
    grpc.StatusCode.PERMISSION_DENIED: "permission_denied",
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_argument",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "resource_exhausted",
}


def refusal_cause(code: grpc.StatusCode, trailing_metadata: Any) -> str | None:
    """Why a call that ended with ``code`` was refused, in a word; None if it was not."""
    cause = _REFUSALS.get(code)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        named = dict(trailing_metadata or ()).get(CAUSE_KEY)
        cause = named if isinstance(named, str) and named else cause
    return cause


def _status(context: grpc.aio.ServicerContext, failed: BaseException | None) -> grpc.StatusCode:
    """The status a call ended with: the one it set, else OK, CANCELLED or UNKNOWN."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):  # some grpcio versions give the number
        return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    if failed is None:
        return grpc.StatusCode.OK
    if isinstance(failed, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


class HandlerWrappings:
    """An interceptor's wrapping of each method's handler, made once, not per call.

    ``wrap(method, handler)`` makes it; it is made again only when the
    handler under it is another object (a token interceptor under it wraps
    each call anew). One entry per method the server has: bounded.
    """

    def __init__(self, wrap: Callable[[str, grpc.RpcMethodHandler], grpc.RpcMethodHandler]) -> None:
        self._wrap = wrap
        self._by_method: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def of(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """``handler`` of ``method``, wrapped."""
        known = self._by_method.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = self._wrap(method, handler)
        self._by_method[method] = (handler, wrapped)
        return wrapped


class CallMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts each unary call in ``calls`` {service, method, code} and refusals in ``refusals``."""

    def __init__(self, calls: Counter, refusals: Counter):
        self._calls = calls
        self._refusals = refusals
        self._wrapped = HandlerWrappings(self._wrap)
        # The child counter of each (service, method, code) met so far.
        self._children: dict[tuple[str, str, grpc.StatusCode], Any] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """The handler, wrapped so that its outcome is counted."""
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        return self._wrapped.of(handler_call_details.method, handler)

    def _wrap(self, path: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        service, _, method = path.lstrip("/").rpartition("/")
        inner = handler.unary_unary

        async def counted(request: Any, context: grpc.aio.ServicerContext) -> Any:
            failed: BaseException | None = None
            try:
                answer = inner(request, context)
                return await answer if inspect.isawaitable(answer) else answer
            except BaseException as error:
                failed = error
                raise
            finally:
                self._count(service, method, context, failed)

        return grpc.unary_unary_rpc_method_handler(
            counted,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _count(
        self,
        service: str,
        method: str,
        context: grpc.aio.ServicerContext,
        failed: BaseException | None,
    ) -> None:
        code = _status(context, failed)
        key = (service, method, code)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._calls.labels(service, method, code.name)
        child.inc()
        if code in _REFUSALS:
            cause = refusal_cause(code, context.trailing_metadata())
            if cause is not None:
                self._refusals.labels(cause).inc()
