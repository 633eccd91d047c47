"""Several Tidemark servers in front of one JetStream cluster: any of them serves any client.

Each server rebuilds every stream from the cluster, so what one wrote the
others read, describe, scale and delete; writes through several servers to
one segment stay in order with strictly increasing ingestion times, even
when one server's clock is an hour behind and falls further; and every
server, including one started afterwards, holds the same watermark index.
Real nats-server processes (the shared 3-node cluster), real gRPC servers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from connector.client import JsonSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.errors import NotFoundError, SegmentSealedError
from connector.framing import iter_frames
from connector.reader import ReaderConfig, ReaderGroupManager, TimeDomain
from connector.reader.group import ReaderGroup
from connector.server import StoreServer
from tests.conftest import CLOCK_START_MS, segment_inside, wait_until
from tests.reader.conftest import ReadLog, drain

pytestmark = pytest.mark.storages("jetstream")

HOUR_MS = 3_600_000


def _frames(client: StoreClient, segment: str) -> list[Any]:
    """Every frame of ``segment``, read from the start through ``client``."""
    frames, offset = [], 0
    end = client.segment_info(segment).write_offset
    while offset < end:
        read = client.read(segment, offset)
        frames += list(iter_frames(read.data, read.offset))
        offset = read.next_offset
    return frames


def _index(server: StoreServer, segment: str) -> tuple[Any, ...]:
    target = segment_inside(server, segment)
    return target.index_entries(), target.event_index_entries(), target.writer_numbers()


def test_any_server_answers_any_client_about_what_another_wrote(
    start_store: Callable[..., StoreServer], storage: str
) -> None:
    first, second = start_store(), start_store()
    with StoreClient(first.uri) as a, StoreClient(second.uri) as b:
        StreamManager(a).create_scope("sc")
        a.create_stream("sc", "st", 1)
        assert [s.segment for s in b.describe_stream("sc", "st").segments] == ["sc/st/0"]
        written = a.append("sc/st/0", "w", 0, [b"e0", b"e1", b"e2"])
        # An offset the second server may not have seen yet is looked for in the cluster.
        at_tail = b.read("sc/st/0", written.write_offset)
        assert (at_tail.data, at_tail.next_offset) == (b"", written.write_offset)
        assert [f.payload for f in _frames(b, "sc/st/0")] == [b"e0", b"e1", b"e2"]

        b.scale_stream("sc", "st", [0], split_count=2)
        with pytest.raises(SegmentSealedError) as sealed:
            a.append("sc/st/0", "w", 3, [b"late"])
        assert set(sealed.value.successors) == {"sc/st/1", "sc/st/2"}
        assert len(a.describe_stream("sc", "st").open_segments) == 2

        assert a.compare_and_set_state("readergroup/sc/g", 0, b"one")[0]
        assert b.get_state("readergroup/sc/g").value == b"one"
        assert not b.compare_and_set_state("readergroup/sc/g", 0, b"two")[0]

        b.seal_stream("sc", "st")
        b.delete_stream("sc", "st")
        wait_until(
            lambda: _gone(a, "sc", "st"), timeout=10, what="the deletion seen by the other server"
        )


def _gone(client: StoreClient, scope: str, stream: str) -> bool:
    try:
        client.describe_stream(scope, stream)
    except NotFoundError:
        return True
    return False


def test_a_reader_group_reads_once_what_writers_wrote_through_either_server(
    start_store: Callable[..., StoreServer],
) -> None:
    first, second = start_store(), start_store()
    with StoreClient(first.uri) as a, StoreClient(second.uri) as b:
        StreamManager(a).create_scope("rg")
        a.create_stream("rg", "st", 2)
        for n in range(40):
            (a if n % 2 else b).append(f"rg/st/{n % 2}", f"w{n % 2}", n // 2, [str(n).encode()])
        group = ReaderGroupManager(a).create_reader_group("rg", "g", ["rg/st"])
        other = ReaderGroup(b, "rg", "g")  # the same group, through the other server
        config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)
        with (
            group.create_reader("r1", JsonSerializer(), config) as one,
            other.create_reader("r2", JsonSerializer(), config) as two,
        ):
            logs = (ReadLog(), ReadLog())
            drain(zip((one, two), logs, strict=True), expected=40)
        read = sorted(e.event for log in logs for e in log.events)
        assert read == sorted(range(40))
        for log in logs:
            log.assert_watermark_rules(0)


def test_two_writers_through_two_servers_interleave_one_segment_without_loss_or_reordering(
    start_store: Callable[..., StoreServer],
) -> None:
    first, second = start_store(), start_store()
    with StoreClient(first.uri) as a, StoreClient(second.uri) as b:
        StreamManager(a).create_scope("iw")
        a.create_stream("iw", "st", 1)
        failures: list[BaseException] = []

        def write(client: StoreClient, writer: str) -> None:
            try:
                for n in range(60):
                    client.append("iw/st/0", writer, n, [f"{writer}-{n}".encode()])
            except BaseException as error:  # reported below
                failures.append(error)

        threads = [
            threading.Thread(target=write, args=(client, name))
            for client, name in ((a, "wa"), (b, "wb"))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not failures
        frames = _frames(a, "iw/st/0")
        for writer in ("wa", "wb"):
            mine = [f.payload.decode() for f in frames if f.payload.startswith(writer.encode())]
            assert mine == [f"{writer}-{n}" for n in range(60)]
        times = [f.ingestion_time for f in frames]
        assert all(x < y for x, y in zip(times, times[1:], strict=False))
        wait_until(lambda: _index(first, "iw/st/0") == _index(second, "iw/st/0"))


def test_a_retry_through_the_other_server_is_a_duplicate(
    start_store: Callable[..., StoreServer],
) -> None:
    first, second = start_store(), start_store()
    with StoreClient(first.uri) as a, StoreClient(second.uri) as b:
        StreamManager(a).create_scope("rt")
        a.create_stream("rt", "st", 1)
        stored = a.append("rt/st/0", "w", 0, [b"a", b"b", b"c"])
        again = b.append("rt/st/0", "w", 0, [b"a", b"b", b"c"])
        assert (again.appended, again.duplicates) == (0, 3)
        assert again.write_offset == stored.write_offset
        assert [f.payload for f in _frames(b, "rt/st/0")] == [b"a", b"b", b"c"]


def test_ingestion_times_never_fall_though_a_server_clock_does_and_every_server_agrees(
    start_store: Callable[..., StoreServer], clock: ManualClock
) -> None:
    """The issue's falling timestamps, injected at the seam: a server whose clock is behind."""
    behind = ManualClock(CLOCK_START_MS - HOUR_MS)
    ahead, late = start_store(), start_store(clock=behind)
    with StoreClient(ahead.uri) as a, StoreClient(late.uri) as b:
        StreamManager(a).create_scope("ft")
        a.create_stream("ft", "st", 2)
        names = ("ft/st/0", "ft/st/1")
        watermarks: dict[tuple[int, str], list[int]] = {(c, n): [] for c in (0, 1) for n in names}
        for n in range(30):
            client, server = (a, ahead) if n % 3 else (b, late)
            clock.advance(7)
            behind.advance(-1_000 if n % 5 == 0 else 5)  # and it falls further now and then
            segment = f"ft/st/{n % 2}"
            client.append(segment, "w", n // 2, [f"{n}".encode()])
            if n % 4 == 0:
                clock.advance(20_000)  # an idle segment gets a tick, from either server
                server.store.advance_idle_segments()
            for number, reading in enumerate((a, b)):
                for name in names:
                    tail = reading.segment_info(name).write_offset
                    watermarks[(number, name)].append(reading.read(name, tail).watermark)
        for where, seen in watermarks.items():
            assert all(x <= y for x, y in zip(seen, seen[1:], strict=False)), (where, seen)
        for name in names:
            times = [f.ingestion_time for f in _frames(a, name)]
            assert all(x < y for x, y in zip(times, times[1:], strict=False)), (name, times)
        rebuilt = start_store()  # a server started afterwards rebuilds the same index
        for name in names:
            wait_until(
                lambda n=name: _index(ahead, n) == _index(late, n) == _index(rebuilt, n),
                what=f"the same index of {name} on three servers",
            )
            offsets, marks, _ = _index(rebuilt, name)[0]
            assert offsets == sorted(offsets) and marks == sorted(marks)


def test_servers_ticking_the_same_idle_segments_at_once_store_one_tick_each(
    start_store: Callable[..., StoreServer], clock: ManualClock
) -> None:
    servers = [start_store(), start_store()]
    with StoreClient(servers[0].uri) as a:
        StreamManager(a).create_scope("tk")
        a.create_stream("tk", "st", 3)
        clock.advance(20_000)
        counts: list[int] = []
        threads = [
            threading.Thread(target=lambda s=s: counts.append(s.store.advance_idle_segments()))
            for s in servers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sum(counts) == 3
        tick = ([-1], [CLOCK_START_MS + 20_000 - 1], [0])  # one entry, the tick's, on both
        for server in servers:
            for n in range(3):
                wait_until(
                    lambda s=server, n=n: _index(s, f"tk/st/{n}")[0] == tick,
                    what=f"the one tick of tk/st/{n} on every server",
                )
