"""A minority partition: with one node of three down everything works; with two, nothing is lost.

Real nats-server processes on loopback (a cluster of this test's own, whose
nodes it stops and starts) and a real gRPC server. With two nodes down the
cluster has no quorum: appends fail with UNAVAILABLE (never NOT_FOUND,
though nats-py reports JetStream's 503 "no responders" like a missing
stream), health says NOT_SERVING; once the nodes are back every
acknowledged event is there once and the store takes writes again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2

from connector.client import StoreClient, StreamManager
from connector.clock import ManualClock
from connector.devtools.local_cluster import LocalCluster
from connector.errors import NotFoundError, StoreUnavailableError
from connector.framing import iter_frames
from connector.server import StoreServer
from connector.store.jetstream import JetStreamConfig
from tests.conftest import wait_until
from tests.probes import health_of

pytestmark = pytest.mark.slow

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def cluster(start_nats_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    return start_nats_cluster()


@pytest.fixture
def server(cluster: LocalCluster, clock: ManualClock) -> Iterator[StoreServer]:
    config = JetStreamConfig(
        servers=tuple(cluster.urls),
        namespace=f"q{uuid.uuid4().hex[:8]}",
        clock=clock,
        polling_period_ms=None,
        unavailable_retry_s=2.0,
    )
    with StoreServer(config) as started:
        yield started


def _payloads(client: StoreClient, segment: str) -> list[bytes]:
    read = client.read(segment, 0, 1 << 20)
    return [f.payload for f in iter_frames(read.data, read.offset)]


def test_one_node_down_changes_nothing_and_two_down_refuse_appends_and_lose_nothing(
    cluster: LocalCluster, server: StoreServer
) -> None:
    patient = StoreClient(server.uri, retry_timeout_s=60.0)
    hasty = StoreClient(server.uri, retry_timeout_s=1.0)
    channel = grpc.insecure_channel(server.address)
    try:
        StreamManager(patient).create_scope("q")
        patient.create_stream("q", "s", 1)
        patient.append("q/s/0", "w", 0, [b"before"])

        cluster.stop_node(0)
        assert patient.append("q/s/0", "w", 1, [b"one down"]).appended == 1
        patient.create_stream("q", "t", 2)
        assert patient.compare_and_set_state("readergroup/q/g", 0, b"v")[0]
        assert _payloads(patient, "q/s/0") == [b"before", b"one down"]
        wait_until(lambda: health_of(channel) == SERVING, timeout=30, what="SERVING, one down")

        cluster.stop_node(1)
        with pytest.raises(StoreUnavailableError):
            hasty.append("q/s/0", "w", 2, [b"no quorum"])
        try:  # what is stored may still be described (a replica answers), never NOT_FOUND
            assert len(hasty.describe_stream("q", "s").segments) == 1
        except StoreUnavailableError:
            pass
        with pytest.raises(StoreUnavailableError):
            hasty.compare_and_set_state("readergroup/q/g", 1, b"w")
        wait_until(lambda: health_of(channel) == NOT_SERVING, timeout=10, what="NOT_SERVING")

        cluster.start_node(1)
        cluster.start_node(0)
        wait_until(lambda: health_of(channel) == SERVING, timeout=60, what="SERVING again")
        # The refused append may or may not have been stored: its retry is stored once.
        patient.append("q/s/0", "w", 2, [b"no quorum"])
        patient.append("q/s/0", "w", 3, [b"after"])
        assert _payloads(patient, "q/s/0") == [b"before", b"one down", b"no quorum", b"after"]
        # The refused compare-and-set's fate was unknown to its caller: either value, no other.
        state = patient.get_state("readergroup/q/g")
        assert (state.revision, state.value) in ((1, b"v"), (2, b"w"))
        assert len(patient.describe_stream("q", "t").segments) == 2
    finally:
        channel.close()
        hasty.close()
        patient.close()


def test_a_stream_deleted_through_another_server_is_not_found_but_an_unreachable_one_is_not(
    cluster: LocalCluster, server: StoreServer
) -> None:
    with StoreClient(server.uri, retry_timeout_s=1.0) as client:
        StreamManager(client).create_scope("d")
        client.create_stream("d", "gone", 1)
        client.seal_stream("d", "gone")
        client.delete_stream("d", "gone")
        with pytest.raises(NotFoundError):
            client.append("d/gone/0", "w", 0, [b"x"])
        client.create_stream("d", "here", 1)
        cluster.stop_node(0)
        cluster.stop_node(1)
        with pytest.raises(StoreUnavailableError):
            client.append("d/here/0", "w", 0, [b"x"])
