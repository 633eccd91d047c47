"""The server's gate: every call's token checked, then its right on the scope it touches.

A thin layer over :class:`TokenTable` and :func:`need_of`. The token is
checked from the call's metadata before its request is read: without a valid
token a call of the store's service is refused with ``UNAUTHENTICATED``, whatever
its bytes, so nobody without a token learns whether a request would decode.
The right is checked on the decoded request: with a token that lacks it,
``PERMISSION_DENIED``. Either way the call's handler never runs, so nothing is
read or written. Calls outside the store's service (health checks,
reflection) pass without a token.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from connector.errors import quoted
from connector.security.credentials import TOKEN_METADATA_KEY
from connector.security.rights import needs_of, needs_token
from connector.security.tokens import Principal, TokenTable

__all__ = ["TokenInterceptor", "authenticate", "authorize", "caller", "check_call"]

_log = logging.getLogger("connector.security")

#: Why a call is refused: its status and message.
Refusal = tuple[grpc.StatusCode, str]

#: Who the call being answered is from (None: a server without tokens).
_CALLER: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "tidemark_caller", default=None
)


def caller() -> Principal | None:
    """Who the call being answered (on this task) is from; None on a server without tokens.

    For a handler that checks a right again on what it answers (a fetch
    session answers segments its caller named in earlier calls).
    """
    return _CALLER.get()


def _token(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == TOKEN_METADATA_KEY and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


#: A call without a token is told how Tidemark's clients give one (any other: the header).
_NO_TOKEN = (
    "this store requires a bearer token: name a file holding it in the store URI "
    "(tidemark://host:port?token_file=FILE), or in Spark's tokenFile option; "
    "tidemarkctl token create makes one"
)


def authenticate(tokens: TokenTable, metadata: Any) -> Principal | Refusal:
    """Who the call's bearer token names, or why it is refused (``UNAUTHENTICATED``).

    A token too long to be one of the file's is refused like any wrong one.
    """
    token = _token(metadata)
    if token is None:
        return grpc.StatusCode.UNAUTHENTICATED, _NO_TOKEN
    principal = tokens.principal(token)
    if principal is None:
        return grpc.StatusCode.UNAUTHENTICATED, "the token is not valid for this store"
    return principal


def authorize(principal: Principal, method: str, request: Any) -> Refusal | None:
    """Why ``principal`` may not make this call (``PERMISSION_DENIED``), or None when it may.

    A call of many items needs the right on every scope it names.
    """
    need = next((n for n in needs_of(method, request) if not principal.allows(n)), None)
    if need is None:
        return None
    name = method.rpartition("/")[2]
    scope = "every scope" if need.scope == "*" else f"scope {quoted(need.scope)}"
    _log.info("refused %s by %r: no %s right on %s", name, principal.name, need.right.value, scope)
    message = f"token {principal.name!r} has no {need.right.value!r} right on {scope} ({name})"
    return grpc.StatusCode.PERMISSION_DENIED, message


def check_call(tokens: TokenTable, method: str, metadata: Any, request: Any) -> Refusal | None:
    """Why a call with a decoded ``request`` must be refused, or None when it may run."""
    if not needs_token(method):
        return None
    who = authenticate(tokens, metadata)
    return authorize(who, method, request) if isinstance(who, Principal) else who


def _refusing(handler: grpc.RpcMethodHandler, refusal: Refusal) -> grpc.RpcMethodHandler:
    """A handler that refuses the call without reading its request (no deserializer)."""

    async def refuse(_request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(*refusal)

    return grpc.unary_unary_rpc_method_handler(
        refuse, response_serializer=handler.response_serializer
    )


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses calls of the store's service without a valid token, then those lacking the right."""

    def __init__(self, tokens: TokenTable):
        self.tokens = tokens

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """The handler, wrapped so that it runs only for an allowed call."""
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not needs_token(method):
            return handler
        who = authenticate(self.tokens, handler_call_details.invocation_metadata)
        if not isinstance(who, Principal):
            return _refusing(handler, who)
        if handler.unary_unary is None:  # the store's service has unary calls only
            return _refusing(handler, (grpc.StatusCode.UNIMPLEMENTED, f"{method} is not unary"))
        inner = handler.unary_unary

        async def authorized(request: Any, context: grpc.aio.ServicerContext) -> Any:
            refusal = authorize(who, method, request)
            if refusal is not None:
                await context.abort(*refusal)
            _CALLER.set(who)
            answer = inner(request, context)
            return await answer if inspect.isawaitable(answer) else answer

        return grpc.unary_unary_rpc_method_handler(
            authorized,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
