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
once the nodes were back. And when another writer replaces the value the
moment a quorum is back, before the call's next try looks, the call cannot
tell whether its lost try was stored: it answers UNAVAILABLE. Before, it
answered "not written" for what had been written, then overwritten.

An append in the same loss (the stream's leader alone) backs off: it fails
UNAVAILABLE within the server's retry budget, having sent the leader a few
dozen messages. Before, it tried again at once on every 10164 answer: about
19,000 messages and 20 s for a 3 s budget; and the budget did not bound the
sync between tries either, which the second part checks (the leader paused
halfway through the call).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import nats
import pytest

from connector.client import StoreClient, StreamManager, StringSerializer
from connector.clock import ManualClock
from connector.devtools.local_cluster import LocalCluster
from connector.errors import StoreUnavailableError, TidemarkError
from connector.framing import iter_frames
from connector.model import StateValue
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


#: The server's retry budget (``--nats-retry-s``) and one request's timeout: a try that
#: times out leaves time for another within the budget, which meets the first one's
#: publish still in flight.
RETRY_S = 3.0
REQUEST_TIMEOUT_S = 1.0
#: What an append failing in a quorum loss may take beyond the budget: the gRPC call and
#: the server's threads, on a machine shared with other work.
SLACK_S = 1.5
#: The messages the stream's lone leader may receive from the server during that append,
#: background probes included (about 30 were measured; 10,000 before the backoff).
MESSAGES_BOUND = 150


#: A budget that outlasts a quorum loss and its heal.
LONG_RETRY_S = 30.0


def _config(cluster: LocalCluster, retry_s: float = RETRY_S) -> JetStreamConfig:
    return JetStreamConfig(
        servers=tuple(cluster.urls),
        namespace=f"q{uuid.uuid4().hex[:8]}",
        clock=ManualClock(CLOCK_START_MS),
        polling_period_ms=None,
        request_timeout_s=REQUEST_TIMEOUT_S,
        unavailable_retry_s=retry_s,
    )


@pytest.fixture
def server(cluster: LocalCluster, storage: str) -> Iterator[StoreServer]:
    assert storage == "jetstream"
    with StoreServer(_config(cluster)) as started:
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


def _timed(call: Callable[[], object]) -> tuple[object, float]:
    """What ``call`` answered (or raised) and how long it took, in seconds."""
    started = time.monotonic()
    answer = _answer(call)
    return answer, time.monotonic() - started


def test_an_append_in_a_quorum_loss_backs_off_and_fails_unavailable_within_its_budget(
    cluster: LocalCluster, server: StoreServer
) -> None:
    namespace = server.store.config.namespace
    patient = StoreClient(server.uri, retry_timeout_s=60.0)
    hasty = StoreClient(server.uri, retry_timeout_s=0.0, call_timeout_s=60.0)
    try:
        StreamManager(patient).create_scope("q")
        patient.create_stream("q", "s", 1)
        patient.append("q/s/0", "w0", 0, [b"before"])
        [stream] = cluster.stream_names(f"{namespace}_")
        leader = cluster.stream_leader(stream)
        assert leader is not None
        others = [node for node in range(3) if node != leader]
        for node in others:
            cluster.kill_node(node)

        # The leader alone: it takes the publish it cannot commit and answers every try after
        # it with error 10164 at once.
        sent_before = cluster.messages_in(leader)
        alone, alone_s = _timed(lambda: hasty.append("q/s/0", "w1", 0, [b"alone"]))
        sent = cluster.messages_in(leader) - sent_before

        # The leader paused partway through the call: the syncs between tries time out too.
        paused: list[object] = []
        call = threading.Thread(
            target=lambda: paused.append(
                _timed(lambda: hasty.append("q/s/0", "w2", 0, [b"paused"]))
            )
        )
        call.start()
        time.sleep(RETRY_S * 0.6)  # when the fault strikes, not a wait for a condition
        cluster.pause_node(leader)
        call.join(timeout=RETRY_S * 10)
        cluster.resume_node(leader)
        for node in others:
            cluster.start_node(node)
        wait_until(lambda: patient.health() == "SERVING", timeout=60, what="SERVING again")

        print(f"alone: {alone_s:.2f} s, {sent} messages; paused: {paused}")
        [(paused_answer, paused_s)] = paused
        for answer in (alone, paused_answer):
            assert isinstance(answer, StoreUnavailableError), answer
        assert alone_s <= RETRY_S + SLACK_S, f"the lone leader's append took {alone_s:.1f} s"
        assert paused_s <= RETRY_S + SLACK_S, f"the paused leader's append took {paused_s:.1f} s"
        assert sent <= MESSAGES_BOUND, f"{sent} messages to the lone leader in {alone_s:.1f} s"
        # Either append may have been stored after the heal: sent again, each is there once.
        patient.append("q/s/0", "w1", 0, [b"alone"])
        patient.append("q/s/0", "w2", 0, [b"paused"])
        read = patient.read("q/s/0", 0, 1 << 20)
        stored = [frame.payload for frame in iter_frames(read.data, read.offset)]
        assert stored == [b"before", b"alone", b"paused"]
    finally:
        hasty.close()
        patient.close()


def test_a_compare_and_set_overtaken_after_the_heal_is_never_answered_not_written(
    cluster: LocalCluster, storage: str
) -> None:
    assert storage == "jetstream"
    key = "counter/overtaken"
    with (
        StoreServer(_config(cluster, LONG_RETRY_S)) as server,
        StoreClient(server.uri, retry_timeout_s=60.0) as patient,
        StoreClient(server.uri, retry_timeout_s=0.0, call_timeout_s=120.0) as hasty,
    ):
        assert patient.compare_and_set_state(key, 0, b"before")[0]
        bucket = f"KV_{state_bucket(server.store.config.namespace)}"
        leader = cluster.stream_leader(bucket)
        assert leader is not None
        others = [node for node in range(3) if node != leader]
        for node in others:
            cluster.kill_node(node)
        answers: list[object] = []
        call = threading.Thread(
            target=lambda: answers.append(
                _answer(lambda: hasty.compare_and_set_state(key, 1, b"a"))
            )
        )
        call.start()
        time.sleep(REQUEST_TIMEOUT_S * 2)  # the fault's length: its first try has timed out
        # Its publish in flight is stored once a quorum is back; another writer, looking all
        # along, follows at once, before the call's next try looks.
        stored: list[StateValue] = []
        overtaking = threading.Thread(target=_overtake, args=(patient, key, stored))
        overtaking.start()
        cluster.start_node(others[0])
        overtaking.join(timeout=60)
        call.join(timeout=LONG_RETRY_S * 2)
        cluster.start_node(others[1])

    [answer] = answers
    assert [(s.value, s.revision) for s in stored] == [(b"a", 2), (b"b", 3)]
    assert not (isinstance(answer, tuple) and answer[0] is False), f"written, yet {answer}"
    assert isinstance(answer, StoreUnavailableError | tuple), answer


def _overtake(client: StoreClient, key: str, stored: list[StateValue]) -> None:
    """Writes ``b"b"`` over ``key``'s next value the moment there is one (for up to 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        current = client.get_state(key)
        if current.revision > 1:
            stored.append(current)
            written, now = client.compare_and_set_state(key, current.revision, b"b")
            stored.extend([now] if written else [])
            return
