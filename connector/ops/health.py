"""The standard gRPC health service and server reflection, for probes and ``grpcurl``.

:class:`HealthReporter` answers ``grpc.health.v1.Health`` for the whole server
(service ``""``) and for the store's service by name: SERVING while the store
takes writes, NOT_SERVING while it refuses them (out of disk space until a
change is stored again, or failed), and NOT_SERVING for good once the server
stops. It follows the store by looking every ``period_s`` seconds, so a probe
sees a change at most that late.
"""

from __future__ import annotations

import threading

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from connector._proto import store_pb2 as _pb
from connector.store import SegmentStore

__all__ = ["STORE_SERVICE", "HealthReporter", "add_reflection"]

#: The full name of the store's gRPC service.
STORE_SERVICE = _pb.DESCRIPTOR.services_by_name["SegmentStore"].full_name

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class HealthReporter:
    """Keeps a server's health service in step with its store's ability to take writes."""

    def __init__(self, store: SegmentStore, period_s: float = 0.1):
        self.servicer = health.HealthServicer()
        self._store = store
        self._period_s = period_s
        self._stop = threading.Event()
        self._serving: bool | None = None
        self._thread = threading.Thread(target=self._follow, name="tidemark-health", daemon=True)

    def add_to(self, server: grpc.Server) -> None:
        """Adds the health service to ``server``."""
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)
        self._update()

    def start(self) -> None:
        """Starts following the store."""
        self._thread.start()

    def stop(self) -> None:
        """Answers NOT_SERVING from now on (the server is going away)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.servicer.enter_graceful_shutdown()

    def _update(self) -> None:
        serving = self._store.accepting_writes
        if serving == self._serving:
            return
        self._serving = serving
        status = _SERVING if serving else _NOT_SERVING
        for service in ("", STORE_SERVICE):
            self.servicer.set(service, status)

    def _follow(self) -> None:
        while not self._stop.wait(self._period_s):
            self._update()


def add_reflection(server: grpc.Server) -> None:
    """Lets clients list the server's services and fetch their descriptors."""
    names = (STORE_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
