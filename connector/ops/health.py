"""The standard gRPC health service and server reflection, for probes and ``grpcurl``.

:class:`HealthReporter` answers ``grpc.health.v1.Health`` for the whole server
(service ``""``) and for the store's service by name: SERVING while the store
takes writes and its background tasks make progress, NOT_SERVING while it
refuses writes (out of disk space until a change is stored again, or failed)
or one of its background tasks is stalled (failing for longer than its bound:
see :mod:`connector.background`), and NOT_SERVING for good once the server
stops. It follows the store in a background task of its own (``health``),
every ``period_s`` seconds on the server's event loop, so a probe sees a
change at most that late.

A third service name, :data:`DATA_SERVICE`, says whether the server's reads
have met damaged data (:mod:`connector.ops.data_loss`): SERVING until one
answered DATA_LOSS, NOT_SERVING from then on. The store's own health does
not change with it: a damaged event is no reason to stop taking writes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from connector._proto import store_pb2 as _pb
from connector._wire import DATA_SERVICE
from connector.background import BackgroundTask, TaskStatus
from connector.store import Storage

__all__ = ["DATA_SERVICE", "STORE_SERVICE", "HealthReporter", "add_reflection", "is_serving"]

#: The full name of the store's gRPC service.
STORE_SERVICE = _pb.DESCRIPTOR.services_by_name["SegmentStore"].full_name

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def is_serving(accepting_writes: bool, tasks: Iterable[TaskStatus], now_ms: int) -> bool:
    """Whether a store is healthy: it takes writes and none of its background tasks is stalled."""
    return accepting_writes and not any(task.stalled(now_ms) for task in tasks)


class HealthReporter:
    """Keeps an asyncio server's health service in step with its store.

    ``data_intact`` says whether no read has met damaged data (by default: none has).
    """

    def __init__(
        self,
        store: Storage,
        period_s: float = 0.1,
        data_intact: Callable[[], bool] = lambda: True,
    ):
        self.servicer = health.aio.HealthServicer()
        self._store = store
        self._data_intact = data_intact
        self._serving: bool | None = None
        self._intact: bool | None = None
        self._task = BackgroundTask(
            "health",
            self._update,
            period_ms=max(1, round(period_s * 1000)),
            clock=store.config.clock,
        )
        self._following: asyncio.Task[None] | None = None

    def add_to(self, server: grpc.aio.Server) -> None:
        """Adds the health service to ``server``."""
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)

    def status(self) -> TaskStatus:
        """How the health watcher itself is doing."""
        return self._task.status()

    async def start(self) -> None:
        """Answers for the store as it is now, then follows it (on the running loop)."""
        await self._task.run_round_async()
        self._following = asyncio.create_task(self._task.run_periodically(), name="tidemark-health")

    async def stop(self) -> None:
        """Answers NOT_SERVING from now on (the server is going away)."""
        if self._following is not None:
            self._following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._following
        await self.servicer.enter_graceful_shutdown()

    async def _update(self) -> None:
        store = self._store
        now = store.config.clock.now_ms()
        serving = is_serving(store.accepting_writes, store.background_status(), now)
        if serving != self._serving:
            status = _SERVING if serving else _NOT_SERVING
            for service in ("", STORE_SERVICE):
                await self.servicer.set(service, status)
            self._serving = serving
        intact = self._data_intact()
        if intact != self._intact:
            await self.servicer.set(DATA_SERVICE, _SERVING if intact else _NOT_SERVING)
            self._intact = intact


def add_reflection(server: grpc.aio.Server) -> None:
    """Lets clients list the server's services and fetch their descriptors."""
    names = (STORE_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
