"""A quorum lost under compare-and-sets: every answer is true once the cluster heals.

A 3-node JetStream cluster of this test's own and a real gRPC server on it.
The state and catalog buckets' leaders are moved to one node, and the other
two are killed: that leader takes conditional publishes it cannot commit,
and commits them once the nodes are back. Meanwhile compare-and-sets of the
state bucket (each key's first, then a second on the same key, as a reader
group's sync retries), a reader group's sync and a stream creation (a
catalog compare-and-set) are made. Each must answer UNAVAILABLE, or an
answer the healed cluster bears out: a "not written" is never written
afterwards, a "written" is there. Before the fix JetStream's error 10164
(another conditional publish on the key in flight: the call's own first
try) was taken for a refusal, "not written", and the key held the value
once the nodes were back.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterator

import nats
import pytest

from connector.client import StoreClient, StreamManager, StringSerializer
from connector.clock import ManualClock
from connector.devtools.local_cluster import LocalCluster
from connector.errors import StoreUnavailableError, TidemarkError
from connector.reader import ReaderGroupManager
from connector.server import StoreServer
from connector.store.jetstream import JetStreamConfig
from connector.store.jetstream.naming import catalog_bucket, state_bucket
from tests.conftest import CLOCK_START_MS, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.storages("jetstream")]

KEYS = [f"readergroup/q/k{n}" for n in range(4)]


@pytest.fixture
def cluster(start_nats_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    return start_nats_cluster()


@pytest.fixture
def server(cluster: LocalCluster, storage: str) -> Iterator[StoreServer]:
    assert storage == "jetstream"
    config = JetStreamConfig(
        servers=tuple(cluster.urls),
        namespace=f"q{uuid.uuid4().hex[:8]}",
        clock=ManualClock(CLOCK_START_MS),
        polling_period_ms=None,
        # A try that times out leaves time for another within the budget: the second try
        # meets the first one's publish, still in flight.
        request_timeout_s=1.0,
        unavailable_retry_s=3.0,
    )
    with StoreServer(config) as started:
        yield started


def _lead_from(cluster: LocalCluster, streams: list[str], node: int) -> None:
    """Moves the leader of each of ``streams`` to ``node`` (a stepdown naming it)."""

    async def step_down() -> None:
        connection = await nats.connect(cluster.urls)
        try:
            for stream in streams:
                if cluster.stream_leader(stream) == node:
                    continue
                body = {"placement": {"preferred": cluster.node_name(node)}}
                await connection.request(
                    f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", json.dumps(body).encode(), 5
                )
        finally:
            await connection.close()

    asyncio.run(step_down())
    wait_until(
        lambda: all(cluster.stream_leader(s) == node for s in streams),
        timeout=30,
        what=f"{streams} led from node {node}",
    )


def _answer(call: Callable[[], object]) -> object:
    """What a call answered, or the error it raised."""
    try:
        return call()
    except TidemarkError as error:
        return error


def test_every_answer_during_a_quorum_loss_is_true_after_the_heal(
    cluster: LocalCluster, server: StoreServer
) -> None:
    namespace = server.store.config.namespace
    buckets = [f"KV_{state_bucket(namespace)}", f"KV_{catalog_bucket(namespace)}"]
    patient = StoreClient(server.uri, retry_timeout_s=60.0)
    hasty = StoreClient(server.uri, retry_timeout_s=0.5, call_timeout_s=20.0)
    try:
        StreamManager(patient).create_scope("q")
        patient.create_stream("q", "s", 1)
        for key in KEYS:
            assert patient.compare_and_set_state(key, 0, b"before")[0]
        ReaderGroupManager(patient).create_reader_group("q", "g", ["q/s"])
        group = ReaderGroupManager(hasty).get_reader_group("q", "g")
        leader = cluster.stream_leader(buckets[0])
        assert leader is not None
        _lead_from(cluster, buckets, leader)

        for node in range(3):
            if node != leader:
                cluster.kill_node(node)
        answers: dict[str, list[object]] = {key: [] for key in KEYS}

        def set_twice(key: str) -> None:  # a first try, then a retry at the same revision
            for value in (b"first", b"second"):
                answers[key].append(_answer(lambda v=value: hasty.compare_and_set_state(key, 1, v)))

        threads = [threading.Thread(target=set_twice, args=(key,)) for key in KEYS]
        for thread in threads:
            thread.start()
        created = _answer(lambda: hasty.create_stream("q", "made-in-the-loss", 1))
        synced = _answer(lambda: group.create_reader("r", StringSerializer()))
        for thread in threads:
            thread.join(timeout=120)

        for node in range(3):
            if node != leader:
                cluster.start_node(node)
        wait_until(lambda: patient.health() == "SERVING", timeout=60, what="SERVING again")

        for key in KEYS:
            state = patient.get_state(key)
            for value, said in zip((b"first", b"second"), answers[key], strict=True):
                if isinstance(said, tuple) and said[0] is False:
                    assert state.value != value, f"{key}: {value!r} said not written, yet stored"
                if isinstance(said, tuple) and said[0] is True:
                    assert state.value == value and state.revision == 2, (key, said, state)
            assert state.revision in (1, 2) and state.value in (b"before", b"first", b"second")
        wrong = [a for a in [*sum(answers.values(), []), created, synced] if _wrong_kind(a)]
        assert wrong == [], f"errors other than UNAVAILABLE: {wrong}"
        if not isinstance(created, TidemarkError):
            assert len(patient.describe_stream("q", "made-in-the-loss").segments) == 1
    finally:
        hasty.close()
        patient.close()


def _wrong_kind(answer: object) -> bool:
    """An error a quorum loss must not give: anything but UNAVAILABLE."""
    return isinstance(answer, TidemarkError) and not isinstance(answer, StoreUnavailableError)
