"""A gRPC proxy in front of a store that loses the requests or answers of chosen calls.

Every call is forwarded to the store unchanged (bytes in, bytes out, status
and trailing metadata passed back), unless a loss is planned for its method
(:meth:`AnswerDroppingProxy.lose`). Each :class:`Loss` is one way a client
stops hearing of a call it made:

- ``ANSWER``: the store makes the change, the caller gets UNAVAILABLE instead
  of the answer (a connection that broke between the store's commit and its reply);
- ``REQUEST``: the store never sees the call, the caller gets UNAVAILABLE;
- ``CONNECTION``: the store makes the change, then every connection of the
  caller to the proxy is cut before the answer leaves (the caller sees its
  transport fail mid-call and reconnects);
- ``HELD``: the request is held until :meth:`AnswerDroppingProxy.release`,
  so the caller's deadline passes first; then it reaches the store, late.

``drop`` (methods) loses the first answer of each, as ``lose(m, 1, Loss.ANSWER)``.
A loss may let something happen ``meanwhile``: between the store's answer
and its loss (another client's change, say).
"""

from __future__ import annotations

import enum
import socket
import struct
import threading
from collections.abc import Callable, Iterable
from concurrent import futures
from typing import Any

import grpc

from connector._wire import GRPC_OPTIONS

__all__ = ["AnswerDroppingProxy", "Loss"]


class Loss(enum.Enum):
    """How a planned call is lost (see the module's docstring)."""

    ANSWER = "answer"
    REQUEST = "request"
    CONNECTION = "connection"
    HELD = "held"


class _Relay:
    """A TCP relay from a port of its own to ``target``, whose connections can be cut at once."""

    def __init__(self, target: tuple[str, int]):
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Resets every open connection (new ones are relayed as before)."""
        with self._lock:
            cut, self._open = self._open, []
        for end in cut:
            try:
                end.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                end.close()
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._listener.close()
        self.cut()


class AnswerDroppingProxy(grpc.GenericRpcHandler):
    """Forwards to ``target`` (``host:port``); ``uri`` is where clients connect."""

    def __init__(self, target: str, drop: Iterable[str] = ()):
        self._channel = grpc.insecure_channel(target, options=GRPC_OPTIONS)
        self._lock = threading.Lock()
        #: Planned losses: method name -> [loss, calls left (None: every call), meanwhile].
        self._plans: dict[str, list[Any]] = {name: [Loss.ANSWER, 1, None] for name in drop}
        self._released = threading.Event()
        #: The methods whose calls were lost, in order.
        self.dropped: list[str] = []
        #: Held requests that reached the store after their release, by method.
        self.delivered_late: list[str] = []
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=32), handlers=[self], options=GRPC_OPTIONS
        )
        port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        self._relay = _Relay(("127.0.0.1", port))
        self.uri = f"tidemark://127.0.0.1:{self._relay.port}"

    def lose(
        self,
        method: str,
        times: int | None = 1,
        loss: Loss = Loss.ANSWER,
        meanwhile: Callable[[], object] | None = None,
    ) -> None:
        """Loses the next ``times`` calls of ``method`` (None: every one until :meth:`heal`).

        ``meanwhile()`` runs after the store answered each, before the answer is lost.
        """
        with self._lock:
            self._plans[method] = [loss, times, meanwhile]
            if loss is Loss.HELD:
                self._released.clear()

    def heal(self) -> None:
        """Forwards every call from now on (held requests stay held until :meth:`release`)."""
        with self._lock:
            self._plans.clear()

    def release(self) -> None:
        """Lets every held request go on to the store."""
        self._released.set()

    def _planned(self, name: str) -> tuple[Loss | None, Callable[[], object] | None]:
        with self._lock:
            plan = self._plans.get(name)
            if plan is None:
                return None, None
            loss, left, meanwhile = plan
            if left is not None:
                if left <= 1:
                    del self._plans[name]
                else:
                    plan[1] = left - 1
            self.dropped.append(name)
            return loss, meanwhile

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        forward = self._channel.unary_unary(method)  # no (de)serializers: bytes pass through
        name = method.rsplit("/", 1)[-1]

        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            loss, meanwhile = self._planned(name)
            if loss is Loss.REQUEST:
                context.abort(grpc.StatusCode.UNAVAILABLE, f"the request of {name} was lost")
            if loss is Loss.HELD:
                self._released.wait(timeout=60)
            try:
                answer = forward(request, timeout=30)
            except grpc.RpcError as error:
                context.set_trailing_metadata(error.trailing_metadata() or ())
                context.abort(error.code(), error.details() or "")
            if loss is Loss.HELD:
                with self._lock:
                    self.delivered_late.append(name)
            if meanwhile is not None:
                meanwhile()
            if loss is Loss.CONNECTION:
                self._relay.cut()
            if loss is not None:
                context.abort(grpc.StatusCode.UNAVAILABLE, f"the answer to {name} was lost")
            return answer

        return grpc.unary_unary_rpc_method_handler(handle)

    def close(self) -> None:
        """Stops the proxy and closes its channel to the store."""
        self._released.set()
        self._relay.close()
        self._server.stop(grace=None)
        self._channel.close()
