"""The server's gate: every call's token checked, then its right on the scope it touches.

A thin layer over :class:`TokenTable` and :func:`need_of`: without a valid
token a call is refused with ``UNAUTHENTICATED``; with a token that lacks the
right it needs, ``PERMISSION_DENIED``. Either way the call's handler never
runs, so nothing is read or written. Calls outside the store's service
(health checks, reflection) pass without a token.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from connector.errors import quoted
from connector.security.credentials import TOKEN_METADATA_KEY
from connector.security.rights import need_of
from connector.security.tokens import TokenTable

__all__ = ["TokenInterceptor", "check_call"]

_log = logging.getLogger("connector.security")


def _token(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == TOKEN_METADATA_KEY and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def check_call(
    tokens: TokenTable, method: str, metadata: Any, request: Any
) -> tuple[grpc.StatusCode, str] | None:
    """Why a call must be refused (status and message), or None when it may run."""
    need = need_of(method, request)
    if need is None:
        return None
    token = _token(metadata)
    if token is None:
        return grpc.StatusCode.UNAUTHENTICATED, "this store requires a bearer token"
    principal = tokens.principal(token)
    if principal is None:
        return grpc.StatusCode.UNAUTHENTICATED, "the token is not valid for this store"
    if not principal.allows(need):
        name = method.rpartition("/")[2]
        scope = "every scope" if need.scope == "*" else f"scope {quoted(need.scope)}"
        _log.info(
            "refused %s by %r: no %s right on %s", name, principal.name, need.right.value, scope
        )
        message = f"token {principal.name!r} has no {need.right.value!r} right on {scope} ({name})"
        return grpc.StatusCode.PERMISSION_DENIED, message
    return None


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """A server interceptor that runs :func:`check_call` before every unary call."""

    def __init__(self, tokens: TokenTable):
        self.tokens = tokens

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """The handler, wrapped so that it runs only for an allowed call."""
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method
        inner = handler.unary_unary

        async def checked(request: Any, context: grpc.aio.ServicerContext) -> Any:
            refusal = check_call(self.tokens, method, context.invocation_metadata(), request)
            if refusal is not None:
                await context.abort(*refusal)
            answer = inner(request, context)
            return await answer if inspect.isawaitable(answer) else answer

        return grpc.unary_unary_rpc_method_handler(
            checked,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
