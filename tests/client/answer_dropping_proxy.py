"""A gRPC proxy in front of a store that loses the answers of chosen calls.

Every call is forwarded to the store unchanged (bytes in, bytes out, status
and trailing metadata passed back). For each method named in ``drop``, the
first call's answer is thrown away after the store has made the change, and
the caller gets UNAVAILABLE instead: the lost answer a client meets when a
connection breaks between the store's commit and its reply.
"""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any

import grpc

from connector._wire import GRPC_OPTIONS


class AnswerDroppingProxy(grpc.GenericRpcHandler):
    """Forwards to ``target`` (``host:port``); ``uri`` is where clients connect."""

    def __init__(self, target: str, drop: set[str]):
        self._channel = grpc.insecure_channel(target, options=GRPC_OPTIONS)
        self._to_drop = set(drop)
        self._lock = threading.Lock()
        #: The methods whose answers were dropped, in order.
        self.dropped: list[str] = []
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8), handlers=[self], options=GRPC_OPTIONS
        )
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.uri = f"tidemark://127.0.0.1:{port}"
        self._server.start()

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        forward = self._channel.unary_unary(method)  # no (de)serializers: bytes pass through

        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            try:
                answer = forward(request, timeout=30)
            except grpc.RpcError as error:
                context.set_trailing_metadata(error.trailing_metadata() or ())
                context.abort(error.code(), error.details() or "")
            name = method.rsplit("/", 1)[-1]
            with self._lock:
                lose = name in self._to_drop
                self._to_drop.discard(name)
                if lose:
                    self.dropped.append(name)
            if lose:
                context.abort(grpc.StatusCode.UNAVAILABLE, f"the answer to {name} was lost")
            return answer

        return grpc.unary_unary_rpc_method_handler(handle)

    def close(self) -> None:
        """Stops the proxy and closes its channel to the store."""
        self._server.stop(grace=None)
        self._channel.close()
