"""A TCP load balancer for tests: one address in front of several Tidemark servers.

What an L4 load balancer (HAProxy, a cloud load balancer, a Kubernetes
Service) does in front of several servers of one JetStream cluster: each
connection goes to the next server in turn that accepts it; when a server
dies its connections break, and a client reconnecting through the proxy is
put through to a server still alive. Bytes pass unchanged both ways.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Sequence

__all__ = ["FailoverProxy"]


class FailoverProxy:
    """Listens on 127.0.0.1 (port 0) and relays every connection to one of ``backends``."""

    def __init__(self, backends: Sequence[str]):
        self.backends = list(backends)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.uri = f"tidemark://{self.address}"
        self._lock = threading.Lock()
        self._next = 0
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._held = False
        threading.Thread(target=self._accept, name="failover-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                held = self._held
            server = None if held else self._connect()
            if server is None:
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        """A connection to the next backend that takes one; None when none does."""
        with self._lock:
            start = self._next
            self._next += 1
        for i in range(len(self.backends)):
            host, port = self.backends[(start + i) % len(self.backends)].rsplit(":", 1)
            try:
                return socket.create_connection((host, int(port)), timeout=1.0)
            except OSError:
                continue
        return None

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            source.settimeout(None)
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def hold(self) -> None:
        """Cuts every relayed connection and refuses new ones (closes them) until :meth:`resume`."""
        with self._lock:
            self._held = True
            sockets, self._sockets = self._sockets, []
        for end in sockets:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                end.close()

    def resume(self) -> None:
        """Relays new connections again."""
        with self._lock:
            self._held = False

    def close(self) -> None:
        """Stops listening and cuts every relayed connection; closing twice is harmless."""
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for end in sockets:
            with contextlib.suppress(OSError):
                end.close()

    def __enter__(self) -> FailoverProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
