"""A store and the gRPC server answering for it, on an event loop of its own."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import socket
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc

from connector._proto import store_pb2_grpc as _pb_grpc
from connector._wire import GRPC_OPTIONS, MAX_READ_BYTES
from connector.background import TaskStatus
from connector.errors import InvalidArgumentError
from connector.ops import HealthReporter, StoreMetrics, add_reflection
from connector.security import ServerTls, TokenInterceptor, TokenTable
from connector.server.fetch_sessions import FetchLimits, FetchSessions
from connector.server.parked_reads import DEFAULT_PARKED_READS_PER_CONNECTION, ParkedReads
from connector.server.request_decoding import DecodingInterceptor, UndecodableRequests
from connector.server.servicer import SegmentStoreServicer
from connector.store import StorageConfig, open_storage

__all__ = ["StoreServer", "is_loopback"]

_log = logging.getLogger("connector.server")

_T = TypeVar("_T")

#: The most metadata a call may carry (gRPC's own default refuses some calls over 8 KiB
#: with RESOURCE_EXHAUSTED, at random, and all over 16 KiB). Up to this, an overlong
#: token is refused like any wrong one, with UNAUTHENTICATED; beyond, gRPC refuses the
#: call with RESOURCE_EXHAUSTED before the server sees it.
MAX_METADATA_BYTES = 64 * 1024
SERVER_METADATA_OPTIONS = [
    ("grpc.max_metadata_size", MAX_METADATA_BYTES),
    ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 possibly in brackets) is this machine only."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def address_in_use(listen: str) -> bool:
    """Whether something already listens on ``listen`` (``host:port``; port 0 never is).

    Asked before the store opens, so a port in use neither touches the data
    dir nor gets as far as gRPC, which logs its failed bind on stderr. A host
    that does not resolve is not in use: the bind itself says what is wrong.
    """
    host, _, port = listen.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return False
    try:
        addresses = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError:
        return False
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return True
    return False


class StoreServer:
    """A store and the gRPC server answering for it; a context manager.

    ``uri`` (``tidemark://host:port``) is valid once the server is built.
    Stopping answers every read waiting at a tail at once, lets in-flight
    calls finish (up to ``grace_s``), then closes the store; stopping twice is
    harmless.

    Threads: the server answers on an asyncio event loop running in a thread
    of its own. The store's calls run on two pools of ``max_workers``
    threads each, one for changes and one for reads, so an append never
    queues behind reads. A read waiting at a segment's tail holds no thread;
    each connection may have ``max_parked_reads_per_connection`` such reads
    at once (a call over many segments counts once), and one more is
    refused with RESOURCE_EXHAUSTED. ``fetch_limits`` bounds the fetch
    sessions of ReadSegments (:class:`~connector.server.fetch_sessions.FetchLimits`).

    Security: with ``tls`` the port speaks TLS only (plaintext clients are
    refused at the handshake); with ``tokens`` every call of the store's
    service needs a bearer token holding the right on the scope it touches
    (:mod:`connector.security`). Without ``tokens`` anyone who reaches the port
    may do anything, so the server then listens on a loopback address only,
    unless ``allow_unauthenticated`` says it may listen elsewhere.

    Operations: the port also answers the standard gRPC health service
    (SERVING while the store takes writes and no background task is stalled)
    and server reflection, which need no token; ``metrics_listen``
    (``host:port``) serves Prometheus metrics over HTTP at ``/metrics``, and
    the same health at ``/healthz`` (``metrics_address`` says where, once
    started).
    """

    def __init__(
        self,
        config: StorageConfig,
        listen: str = "127.0.0.1:0",
        max_workers: int = 32,
        tls: ServerTls | None = None,
        tokens: TokenTable | None = None,
        allow_unauthenticated: bool = False,
        metrics_listen: str | None = None,
        max_parked_reads_per_connection: int = DEFAULT_PARKED_READS_PER_CONNECTION,
        fetch_limits: FetchLimits | None = None,
    ):
        if config.max_event_size > MAX_READ_BYTES:
            msg = (
                f"max_event_size must be <= {MAX_READ_BYTES} for the store to be served, "
                f"got {config.max_event_size!r}"
            )
            raise InvalidArgumentError(msg)
        host = listen.rsplit(":", 1)[0]
        if tokens is None and not allow_unauthenticated and not is_loopback(host):
            msg = (
                f"refusing to listen on {listen!r} without authentication: give a token file, "
                "listen on a loopback address, or allow unauthenticated access explicitly"
            )
            raise InvalidArgumentError(msg)
        if address_in_use(listen):
            msg = f"cannot listen on {listen!r}: the address is in use"
            raise InvalidArgumentError(msg)
        self._parked = ParkedReads(max_parked_reads_per_connection)
        self.sessions = FetchSessions(fetch_limits)
        #: Requests refused because their bytes did not decode (reported in rate-limited lines).
        self.undecodable = UndecodableRequests()
        self.tokens = tokens
        self.tls = tls
        credentials = tls.credentials() if tls is not None else None
        self.store = open_storage(config)
        self.health = HealthReporter(
            self.store, data_intact=lambda: not self.metrics.data_loss.found
        )
        self.metrics = StoreMetrics(self.store, self.background_status)
        self.metrics.watch_calls(self.sessions.counts, self._parked.by_method)
        self._metrics_listen = metrics_listen
        self.metrics_address: str | None = None
        self._changes = ThreadPoolExecutor(max_workers, thread_name_prefix="tidemark-change")
        self._reads = ThreadPoolExecutor(max_workers, thread_name_prefix="tidemark-read")
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._loop.run_forever, name="tidemark-grpc", daemon=True
        )
        self._loop_thread.start()
        self._stopped = False
        try:
            port = self._on_loop(self._build(listen, credentials))
        except BaseException:
            self._abandon()
            raise
        if port == 0:
            self._abandon()
            msg = f"cannot listen on {listen!r}: the address is invalid or in use"
            raise InvalidArgumentError(msg)
        self.address = f"{host}:{port}"
        self.uri = f"tidemark://{self.address}"

    async def _build(self, listen: str, credentials: grpc.ServerCredentials | None) -> int:
        """Makes the gRPC server on the loop and binds ``listen``; returns the port (0: failed)."""
        # The decoding interceptor wraps the token interceptor's handler: the token is
        # checked on the metadata as the call arrives (a refused call's bytes are never
        # decoded), then the request is decoded, then the right is checked on it.
        # The call counter is outermost: it sees how every call ended, refusals included.
        interceptors: list[grpc.aio.ServerInterceptor] = [
            self.metrics.interceptor,
            DecodingInterceptor(self.undecodable),
        ]
        if self.tokens is not None:
            interceptors.append(TokenInterceptor(self.tokens))
        self._server = grpc.aio.server(
            interceptors=interceptors,
            # No SO_REUSEPORT: a second server on a port in use must fail, not share it.
            options=[*GRPC_OPTIONS, *SERVER_METADATA_OPTIONS, ("grpc.so_reuseport", 0)],
        )
        servicer = SegmentStoreServicer(
            self.store, self.metrics, self._changes, self._reads, self._parked, self.sessions
        )
        _pb_grpc.add_SegmentStoreServicer_to_server(servicer, self._server)
        self.health.add_to(self._server)
        add_reflection(self._server)
        try:
            if credentials is not None:
                return self._server.add_secure_port(listen, credentials)
            return self._server.add_insecure_port(listen)
        except RuntimeError:  # grpcio reports a failed bind by raising (older: port 0)
            return 0

    def _on_loop(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Runs ``work`` on the server's loop and waits for its result."""
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join()
        self._loop.close()
        self._changes.shutdown()
        self._reads.shutdown()

    def _abandon(self) -> None:
        """Closes what was built when the server cannot start; stopping is then a no-op."""
        self._stopped = True
        self._close_loop()
        self.store.close()

    def start(self) -> StoreServer:
        """Starts answering calls; returns self."""
        if self._metrics_listen is not None:
            try:
                port = self.metrics.serve(self._metrics_listen)
            except (OSError, ValueError) as error:
                self._abandon()
                msg = f"cannot serve metrics on {self._metrics_listen!r}: {error}"
                raise InvalidArgumentError(msg) from None
            self.metrics_address = f"{self._metrics_listen.rpartition(':')[0]}:{port}"
            _log.info("metrics at http://%s/metrics", self.metrics_address)
        self._on_loop(self._start())
        _log.info(
            "serving %s from %s (%s, %s)",
            self.uri,
            self.store.location(),
            "TLS" if self.tls else "plaintext",
            f"{len(self.tokens)} token(s)" if self.tokens is not None else "no authentication",
        )
        if self.tokens is None:
            _log.warning(
                "no token file: every caller that reaches %s may read, write and manage "
                "every scope",
                self.address,
            )
        return self

    async def _start(self) -> None:
        await self.health.start()
        await self._server.start()

    def stop(self, grace_s: float = 2.0) -> None:
        """Stops serving and closes the store."""
        if self._stopped:
            return
        self._stopped = True
        self._on_loop(self._stop(grace_s))
        self._close_loop()
        self.store.close()
        self.metrics.close()
        _log.info("stopped %s", self.uri)

    async def _stop(self, grace_s: float) -> None:
        await self.health.stop()
        self._parked.close()
        await self._server.stop(grace_s)
        self.sessions.close_all()

    def background_status(self) -> list[TaskStatus]:
        """How each background task of the server is doing: the store's, and the health watcher."""
        return [*self.store.background_status(), self.health.status()]

    def wait(self) -> None:
        """Blocks until the server stops."""
        self._loop_thread.join()

    def __enter__(self) -> StoreServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"StoreServer(uri={self.uri!r})"
