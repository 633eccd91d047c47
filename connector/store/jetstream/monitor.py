"""What a server knows of the cluster's health: quorum, leader elections, replication lag.

- :meth:`ClusterMonitor.probe` asks the catalog bucket for its state every
  half second: the cluster takes writes while its leader has a quorum of
  current replicas (:func:`has_quorum`; a cluster without a quorum elects no
  leader, and a leader cut off from its peers sees them fall behind).
  Health is NOT_SERVING from the first failed probe, or the connection
  dropping, until a probe works again.
- Leader elections of the store's streams and buckets are counted from
  JetStream's advisories (``$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED``).
- :meth:`ClusterMonitor.replication` asks each stream's leader how its
  replicas stand (current, lag in operations, last seen), for metrics.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from nats.aio.msg import Msg

from connector.model import ReplicaState
from connector.store.jetstream.engine import Engine, EngineUnavailable
from connector.store.jetstream.naming import catalog_bucket, state_bucket

__all__ = ["ClusterMonitor", "has_quorum"]

_log = logging.getLogger(__name__)

#: How long a probe or a replication question may take (s).
PROBE_TIMEOUT_S = 2.0


class ClusterMonitor:
    """The cluster as one server sees it; see the module docstring."""

    def __init__(self, engine: Engine, namespace: str):
        self._engine = engine
        self._namespace = namespace
        self._buckets = {
            f"KV_{catalog_bucket(namespace)}": "catalog",
            f"KV_{state_bucket(namespace)}": "state",
        }
        self._lock = threading.Lock()
        self._elections: collections.Counter[str] = collections.Counter()
        self._reachable = True

    @property
    def reachable(self) -> bool:
        """Whether the last probe found a leader (and the connection has not dropped since)."""
        return self._reachable and self._engine.connected

    def connection_changed(self, up: bool) -> None:
        """The connection went (``up`` False) or came back."""
        if not up:
            self._reachable = False

    async def start(self) -> None:
        """Listens to leader elections (on the loop)."""
        await self._engine.subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.*", self._elected)

    async def probe(self) -> None:
        """One probe of the catalog's leader; raises when there is none (see module)."""
        catalog = f"KV_{catalog_bucket(self._namespace)}"
        try:
            info = await self._engine.stream_info(catalog, timeout_s=PROBE_TIMEOUT_S)
        except Exception:
            self._reachable = False
            raise
        self._reachable = has_quorum(info.get("cluster"))
        if not self._reachable:
            msg = "the catalog's replicas have no quorum: the cluster cannot take writes"
            raise EngineUnavailable(msg)

    async def _elected(self, msg: Msg) -> None:
        try:
            stream = json.loads(msg.data).get("stream", "")
        except ValueError:
            return
        if stream.startswith(f"{self._namespace}_") or stream in self._buckets:
            with self._lock:
                self._elections[stream] += 1

    def leader_changes(self, streams: Mapping[str, str]) -> dict[str, int]:
        """Leader elections heard of, by log (``streams`` names the JetStream streams)."""
        names = {**streams, **self._buckets}
        with self._lock:
            counts = dict(self._elections)
        return {names.get(stream, stream): count for stream, count in counts.items()}

    async def replication(self, streams: Mapping[str, str]) -> list[ReplicaState]:
        """Each log's leader and replicas (``streams`` names the JetStream streams)."""
        names = {**streams, **self._buckets}
        infos = await asyncio.gather(*(self._info(stream) for stream in names))
        states: list[ReplicaState] = []
        for stream, info in zip(names, infos, strict=True):
            if info is not None:
                states.extend(_replicas(names[stream], info.get("cluster") or {}))
        return states

    async def _info(self, stream: str) -> dict[str, Any] | None:
        try:
            return await self._engine.stream_info(stream, timeout_s=PROBE_TIMEOUT_S)
        except Exception as error:  # a scrape shows the others
            _log.debug("no info of %s: %s", stream, error)
            return None


def has_quorum(cluster: Mapping[str, Any] | None) -> bool:
    """Whether a stream's cluster info shows a leader with a quorum of current replicas.

    A replica answers for a stream without a leader (the answer names none),
    and a leader cut off from its peers still names itself for a while: it
    then counts its peers as not current. A stream of one replica (no
    cluster info) always has its quorum.
    """
    if cluster is None:
        return True
    if not cluster.get("leader"):
        return False
    peers = cluster.get("replicas") or []
    with_leader = 1 + sum(1 for peer in peers if peer.get("current") and not peer.get("offline"))
    return with_leader >= (len(peers) + 1) // 2 + 1


def _replicas(log: str, cluster: Mapping[str, Any]) -> list[ReplicaState]:
    states = []
    leader = cluster.get("leader")
    if leader:
        states.append(ReplicaState(log, leader, True, True, 0, 0))
    for replica in cluster.get("replicas") or []:
        active_ns = replica.get("active")
        states.append(
            ReplicaState(
                log,
                replica.get("name", "?"),
                False,
                bool(replica.get("current")),
                int(replica.get("lag", 0)),
                None if active_ns is None else int(active_ns) // 1_000_000,
            )
        )
    return states
