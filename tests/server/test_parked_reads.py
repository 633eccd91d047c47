"""Reads waiting at a tail hold no server thread: appends and other calls are answered meanwhile.

Each test parks raw ReadSegment calls at a segment's tail (long ``wait_ms``)
on a real server over gRPC, then checks what a synchronous server with one
thread per call could not do: answer more waiting reads than it has threads,
release a cancelled read at once, cap one connection's waiting reads with a
clear status, and answer every waiting read when it stops.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from connector._proto import store_pb2 as pb
from connector._proto import store_pb2_grpc
from connector._wire import GRPC_OPTIONS
from connector.client import StoreClient
from connector.server import StoreServer
from connector.store import StoreConfig
from tests.conftest import new_stream_in

pytestmark = pytest.mark.storages("file", "jetstream")

#: Longer than any test waits: a read that returns did so because it was woken.
_WAIT_MS = 120_000


@pytest.fixture
def channels(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Opens raw stubs, each on a connection of its own, to a server; closes them after.

    ``channels()`` connects to ``store_server`` (started then: a test with a server of
    its own on the same data dir must not start it), ``channels(server)`` to ``server``.
    """
    opened: list[grpc.Channel] = []

    def stub(server: StoreServer | None = None) -> store_pb2_grpc.SegmentStoreStub:
        server = server or request.getfixturevalue("store_server")
        # A connection of its own: channels of one process otherwise share one.
        options = [*GRPC_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
        channel = grpc.insecure_channel(server.address, options=options)
        opened.append(channel)
        return store_pb2_grpc.SegmentStoreStub(channel)

    yield stub
    for channel in opened:
        channel.close()


def _stream(server: StoreServer, segments: int) -> list[str]:
    with StoreClient(server.uri) as client:
        stream = new_stream_in(client, segments)
        return [f"{stream}/{number}" for number in range(segments)]


def _park(stub: Any, segment: str, count: int) -> list[grpc.Future]:
    request = pb.ReadRequest(segment=segment, offset=0, max_bytes=1024, wait_ms=_WAIT_MS)
    return [stub.ReadSegment.future(request, timeout=_WAIT_MS / 1000) for _ in range(count)]


def test_an_append_is_answered_while_more_reads_wait_than_the_server_has_threads(
    store_server: StoreServer, channels: Callable[[], Any], wait_until: Callable[..., Any]
) -> None:
    segments = _stream(store_server, 2)
    scope, stream, _ = segments[0].split("/")
    # Twice the server's worker threads, on the segment the append does not touch.
    parked = _park(channels(), segments[0], 64)
    wait_until(lambda: store_server.store.parked_reads == 64, timeout=20, what="64 parked reads")

    appended = channels().AppendEvents(
        pb.AppendRequest(segment=segments[1], writer_id="w", first_event_number=0, events=[b"x"]),
        timeout=10,
    )
    described = channels().DescribeStream(
        pb.DescribeStreamRequest(scope=scope, stream=stream), timeout=10
    )

    assert appended.appended == 1
    assert len(described.segments) == 2
    assert not any(read.done() for read in parked)
    for read in parked:
        read.cancel()


def test_a_parked_read_answers_as_soon_as_data_arrives(
    store_server: StoreServer, channels: Callable[[], Any]
) -> None:
    [segment] = _stream(store_server, 1)
    parked = _park(channels(), segment, 3)
    with StoreClient(store_server.uri) as client:
        client.append(segment, "w", 0, [b"hello"])

    answers = [read.result(timeout=20) for read in parked]

    assert all(answer.next_offset > 0 and answer.data for answer in answers)


def test_a_cancelled_read_gives_back_its_wait_at_once(
    store_server: StoreServer, channels: Callable[[], Any], wait_until: Callable[..., Any]
) -> None:
    [segment] = _stream(store_server, 1)
    parked = _park(channels(), segment, 40)
    wait_until(lambda: store_server.store.parked_reads == 40, timeout=20, what="40 parked reads")

    for read in parked:
        read.cancel()

    wait_until(lambda: store_server.store.parked_reads == 0, timeout=5, what="no parked read")


def test_one_connection_may_park_only_so_many_reads(
    data_dir: pathlib.Path, clock: Any, channels: Callable[..., Any], wait_until: Callable[..., Any]
) -> None:
    config = StoreConfig(data_dir=str(data_dir), clock=clock, polling_period_ms=None)
    with StoreServer(config, max_parked_reads_per_connection=4) as server:
        [segment] = _stream(server, 1)
        crowded = channels(server)
        parked = _park(crowded, segment, 4)
        wait_until(lambda: server.store.parked_reads == 4, timeout=20, what="4 parked reads")

        with pytest.raises(grpc.RpcError) as refused:
            crowded.ReadSegment(
                pb.ReadRequest(segment=segment, offset=0, max_bytes=1024, wait_ms=_WAIT_MS),
                timeout=10,
            )
        other = _park(channels(server), segment, 1)
        wait_until(lambda: server.store.parked_reads == 5, timeout=20, what="5 parked reads")
        with StoreClient(server.uri) as client:
            client.append(segment, "w", 0, [b"hello"])
        answers = [read.result(timeout=20) for read in [*parked, *other]]

    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "already has 4 reads waiting at segment tails" in (refused.value.details() or "")
    assert all(answer.data for answer in answers)


def test_a_stopping_server_answers_its_parked_reads(
    data_dir: pathlib.Path, clock: Any, channels: Callable[..., Any], wait_until: Callable[..., Any]
) -> None:
    config = StoreConfig(data_dir=str(data_dir), clock=clock, polling_period_ms=None)
    server = StoreServer(config).start()
    [segment] = _stream(server, 1)
    parked = _park(channels(server), segment, 8)
    wait_until(lambda: server.store.parked_reads == 8, timeout=20, what="8 parked reads")

    server.stop(grace_s=60)

    answers = [read.result(timeout=1) for read in parked]
    assert all(answer.next_offset == 0 and not answer.data for answer in answers)
