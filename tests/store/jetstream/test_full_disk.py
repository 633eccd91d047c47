"""Full disks under a JetStream cluster: one node's, then every node's, then room again.

Real nats-server processes on loopback whose JetStream storage is a tmpfs
of each node's own (tests run as root), a real gRPC server. A nats-server
takes 75% of its disk's free space at start as its storage limit. Node n1
gets 4 MiB, n2 and n3 12 MiB, and one writer appends 50 kB events:

- n1 fills first: the other two hold a quorum, so every append is still
  acknowledged (a full disk on one machine is that machine out);
- then n2 and n3 fill: appends are refused with UNAVAILABLE (the cluster
  stops answering for the stream, as without a quorum), health says
  NOT_SERVING, and everything acknowledged is still read;
- the operator gives every node room and restarts them one after another:
  the same Tidemark server, not restarted, takes appends again, the refused
  append sent again is stored once, and idle ticks move the watermark.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import urllib.request
import uuid

import grpc
import pytest

from connector.client import StoreClient, StreamManager
from connector.clock import ManualClock
from connector.devtools.local_cluster import LocalCluster
from connector.errors import StoreUnavailableError
from connector.framing import iter_frames
from connector.server import StoreServer
from connector.store.jetstream import JetStreamConfig
from tests.conftest import wait_until
from tests.probes import NOT_SERVING, SERVING, health_of
from tests.store.jetstream.disks import node_disks

pytestmark = pytest.mark.slow

EVENT = 50_000
#: Each node's disk; n1's fills first.
DISKS = ("4m", "12m", "12m")
#: Appends past what n1 can hold (3 MiB of its 4), all within what n2 and n3 hold (9 of 12).
PAST_ONE_DISK = 5 * 1024 * 1024 // EVENT
#: A bound on the appends it takes to fill n2 and n3 (they hold 9 MiB).
AT_MOST = 2 * 12 * 1024 * 1024 // EVENT


def _storage(cluster: LocalCluster, node: int) -> tuple[int, int]:
    """Bytes node ``node`` stores for JetStream, and its limit (its monitoring port's /jsz)."""
    url = f"http://{cluster.host}:{cluster.ports[node].monitor}/jsz"
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 (loopback)
        usage = json.loads(answer.read())
    return usage["storage"], usage["config"]["max_storage"]


def _full(cluster: LocalCluster, node: int) -> bool:
    """Whether node ``node`` has no room left for another event."""
    stored, limit = _storage(cluster, node)
    return stored + EVENT > limit


def _payloads(client: StoreClient, segment: str) -> list[bytes]:
    payloads: list[bytes] = []
    offset = 0
    while True:
        read = client.read(segment, offset, 1 << 20)
        if read.next_offset == offset:
            return payloads
        payloads += [frame.payload for frame in iter_frames(read.data, read.offset)]
        offset = read.next_offset


def _event(number: int) -> bytes:
    return number.to_bytes(4, "big") * (EVENT // 4)


def test_a_full_node_changes_nothing_and_full_nodes_refuse_until_given_room(
    tmp_path: pathlib.Path, clock: ManualClock
) -> None:
    cluster = LocalCluster(str(tmp_path / "cluster"))
    with node_disks(cluster, DISKS) as disks, cluster:
        config = JetStreamConfig(
            servers=tuple(cluster.urls),
            namespace=f"fd{uuid.uuid4().hex[:8]}",
            clock=clock,
            polling_period_ms=None,
            unavailable_retry_s=2.0,
        )
        with (
            StoreServer(config) as server,
            StoreClient(server.uri, retry_timeout_s=1.0) as client,
            grpc.insecure_channel(server.address) as channel,
        ):
            StreamManager(client).create_scope("fd")
            client.create_stream("fd", "s", 1)
            acked: list[bytes] = []

            for number in range(PAST_ONE_DISK):  # n1 fills; n2 and n3 are a quorum
                client.append("fd/s/0", "w", number, [_event(number)])
                acked.append(_event(number))
            assert _full(cluster, 0) and not _full(cluster, 1) and not _full(cluster, 2)
            assert health_of(channel) == SERVING

            refused = None
            for number in range(len(acked), AT_MOST):
                try:
                    client.append("fd/s/0", "w", number, [_event(number)])
                except StoreUnavailableError:
                    refused = number
                    break
                acked.append(_event(number))
            assert refused is not None, f"{AT_MOST} appends of {EVENT} bytes all acknowledged"
            assert _full(cluster, 1) and _full(cluster, 2)
            with pytest.raises(StoreUnavailableError):  # still full: refused again
                client.append("fd/s/0", "w", refused, [_event(refused)])
            wait_until(lambda: health_of(channel) == NOT_SERVING, timeout=30, what="NOT_SERVING")
            assert _payloads(client, "fd/s/0") == acked  # reads go on

            for node, disk in enumerate(disks):  # room, then a rolling restart
                subprocess.run(["mount", "-o", "remount,size=64m", "tmpfs", str(disk)], check=True)
                cluster.stop_node(node)
                cluster.start_node(node)
            cluster.wait_ready()
            wait_until(lambda: health_of(channel) == SERVING, timeout=60, what="SERVING again")

            with StoreClient(server.uri, retry_timeout_s=30.0) as patient:
                resent = patient.append("fd/s/0", "w", refused, [_event(refused)])
                assert resent.appended + resent.duplicates == 1
                patient.append("fd/s/0", "w", refused + 1, [b"after"])
                assert _payloads(patient, "fd/s/0") == [*acked, _event(refused), b"after"]
                before = patient.segment_info("fd/s/0")
                # Ingestion times ran ahead of the still clock by 1 ms an append: idle from there.
                clock.set(before.last_write_time + config.max_watermark_lag_ms + 1)
                assert server.store.advance_idle_segments() == 1  # no append, no restart
                assert patient.segment_info("fd/s/0").watermark > before.watermark
