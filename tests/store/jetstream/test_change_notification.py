"""Change notification across Tidemark servers of one JetStream cluster, and across a cut.

A fetch session waiting through server A wakes when another server, B,
appends; with A's connection to the cluster cut (proxies between A and
every node, nodes that do not advertise one another, so A cannot go round
them), B's appends are stored without A; once the connection is back, A's
follower catches up and its catch-up wakes the session: nothing is missed,
nothing read twice. Real nats-server processes, real gRPC servers.
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from connector.client import FetchSession, StoreClient
from connector.clock import ManualClock
from connector.devtools.local_cluster import LocalCluster
from connector.framing import iter_frames
from connector.model import StreamTails
from connector.server import StoreServer
from connector.store.jetstream import JetStreamConfig
from tests.conftest import wait_until
from tests.store.jetstream.failover_proxy import FailoverProxy

pytestmark = pytest.mark.storages("jetstream")


def _parked(server: StoreServer) -> float:
    labels = {"method": "ReadSegments"}
    return server.metrics.registry.get_sample_value("tidemark_parked_calls", labels) or 0.0


@pytest.fixture
def servers(
    start_nats_cluster: Callable[..., LocalCluster], clock: ManualClock, storage: str
) -> Iterator[tuple[StoreServer, StoreServer, list[FailoverProxy]]]:
    """Server A, reaching each node through a proxy of its own, and server B, reaching them."""
    cluster = start_nats_cluster(advertise=False)
    proxies = [FailoverProxy([url.removeprefix("nats://")]) for url in cluster.urls]
    namespace = f"t{uuid.uuid4().hex[:12]}"

    def config(urls: list[str]) -> JetStreamConfig:
        return JetStreamConfig(
            clock=clock, polling_period_ms=None, servers=tuple(urls), namespace=namespace
        )

    first = StoreServer(config([f"nats://{p.address}" for p in proxies])).start()
    second = StoreServer(config(cluster.urls)).start()
    yield first, second, proxies
    for server in (second, first):
        server.stop(grace_s=0.5)
    for proxy in proxies:
        proxy.close()


def _events(reads: list) -> dict[str, list[bytes]]:
    got: dict[str, list[bytes]] = {}
    for read in reads:
        got.setdefault(read.segment, []).extend(
            f.payload for f in iter_frames(read.data, read.offset)
        )
    return got


def test_a_session_through_one_server_hears_another_and_misses_nothing_across_a_cut(
    servers: tuple[StoreServer, StoreServer, list[FailoverProxy]], tmp_path: pathlib.Path
) -> None:
    a, b, proxies = servers
    with (
        StoreClient(a.uri, retry_timeout_s=10.0) as through_a,
        StoreClient(b.uri, retry_timeout_s=10.0) as through_b,
        FetchSession(through_a) as session,
        ThreadPoolExecutor(1) as waiter,
    ):
        through_a.create_scope("cn")
        through_a.create_stream("cn", "st", 4)
        names = [f"cn/st/{n}" for n in range(4)]
        for name in names:
            session.add(name, 0)
        assert len(session.fetch().reads) == 4  # each segment's watermarks, at once
        [before] = through_a.describe_tails(["cn/st"])
        assert isinstance(before, StreamTails)

        waiting = waiter.submit(session.fetch, 10_000)
        wait_until(lambda: _parked(a) == 1, what="the session parked on server A")
        through_b.append(names[1], "w1", 0, [b"b-0"])
        woken = waiting.result(timeout=5.0)  # pushed by the cluster to A, not its 10 s wait
        assert _events(list(woken.reads)) == {names[1]: [b"b-0"]}
        session.rearm(names[1])
        [seen] = through_a.describe_tails([before])
        assert isinstance(seen, StreamTails)

        for proxy in proxies:
            proxy.hold()
        wait_until(lambda: not a.store.accepting_writes, what="server A cut from the cluster")
        written = {names[1]: [b"b-1", b"b-2"], names[2]: [b"c-0"], names[3]: [b"d-0", b"d-1"]}
        for name, events in written.items():
            first = 1 if name == names[1] else 0
            through_b.append(name, f"w{name[-1]}", first, events)
        [unseen] = through_a.describe_tails([seen])  # A's memory: the cut held
        assert isinstance(unseen, StreamTails) and unseen.segments == ()
        for proxy in proxies:
            proxy.resume()

        reads = []

        def all_read() -> bool:
            result = session.fetch(1_000)
            reads.extend(result.reads)
            for read in result.reads:
                if read.data:
                    session.rearm(read.segment)
            got = _events(reads)
            return all(len(got.get(n, [])) >= len(e) for n, e in written.items())

        wait_until(all_read, timeout=30.0, interval=0, what="B's appends read through A")
        assert _events(reads) == written  # in order, each once, nothing of before again
        [after] = through_a.describe_tails([before])
        assert isinstance(after, StreamTails)
        offsets = {t.segment: t.write_offset for t in after.segments}
        for name in written:
            assert offsets[name] == through_b.segment_info(name).write_offset
