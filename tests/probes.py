"""What tests look at from outside a server: its metrics, its health, a disk that fills up.

And one way in: a bit of a segment's stored data flipped under a running server.
And one look inside a planner: how many segment cursors it makes (:class:`CursorCount`),
its work per segment.

Shared by the full-disk tests of the store, the operations tests and the
fault suite, so each probe is written once.
"""

from __future__ import annotations

import errno
import pathlib
import re
import urllib.request
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from connector import StoreClient
from connector.errors import ResourceExhaustedError
from connector.framing import iter_frames
from connector.groups.state import SegmentCursor
from connector.reader.source import SegmentRange, read_range
from connector.server import StoreServer
from connector.store import SegmentStore
from tests.conftest import ServerProcess, segment_inside, wait_until

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

#: Metric samples by (name, sorted label pairs).
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(address: str) -> Samples:
    """Every sample the server's ``/metrics`` at ``address`` (``host:port``) serves now."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def calls(server: StoreServer, method: str | None = None) -> int:
    """Calls of ``method`` (None: of any) an in-process server answered, whatever the code."""
    by_method = calls_by_method(server)
    return sum(by_method.values()) if method is None else by_method.get(method, 0)


def calls_by_method(server: StoreServer) -> dict[str, int]:
    """The calls an in-process server answered, whatever the code, by method: one look."""
    counts: dict[str, int] = {}
    for family in server.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "tidemark_requests_total":
                method = sample.labels["method"]
                counts[method] = counts.get(method, 0) + int(sample.value)
    return counts


class CallCounter:
    """What an in-process server answered since the last look, by method (``all``: the sum)."""

    def __init__(self, server: StoreServer):
        self.server = server
        self._at = calls_by_method(server)

    def since(self) -> dict[str, int]:
        """The calls since the last look, of the methods called (empty: none)."""
        now = calls_by_method(self.server)
        delta = {m: n - self._at.get(m, 0) for m, n in now.items() if n != self._at.get(m, 0)}
        self._at = now
        return {"all": sum(delta.values()), **delta} if delta else {}

    def wait_for(self, method: str, count: int, timeout: float, what: str) -> dict[str, int]:
        """Waits (bounded) for ``count`` calls of ``method`` since the last look; returns all."""
        seen: dict[str, int] = {}

        def enough() -> bool:
            for name, calls_of in self.since().items():
                seen[name] = seen.get(name, 0) + calls_of
            return seen.get(method, 0) >= count

        wait_until(enough, timeout=timeout, what=what)
        return seen


class CursorCount:
    """How many segment cursors the reader core made since the last look: its work per segment.

    Every frontier a planner reads, plans or copies whole makes a cursor per
    segment; one that follows only what moved makes one per segment moved.
    Installed on ``SegmentCursor`` with ``monkeypatch`` for the test.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self._made = 0
        made = SegmentCursor.__init__

        def counted(cursor: SegmentCursor, *args: Any, **kwargs: Any) -> None:
            self._made += 1
            made(cursor, *args, **kwargs)

        monkeypatch.setattr(SegmentCursor, "__init__", counted)

    def since(self) -> int:
        """The cursors made since the last look."""
        made, self._made = self._made, 0
        return made


def metrics_address(server: ServerProcess) -> str:
    """Where a server process started with ``--metrics-listen`` serves metrics (from its log)."""

    def logged() -> str | None:
        found = re.search(r"metrics at http://(\S+)/metrics", server.log())
        return found.group(1) if found else None

    return wait_until(logged, timeout=10, what=f"{server!r} to log its metrics address")


def health_of(channel: grpc.Channel, service: str = "") -> int:
    """The health service's answer for ``service`` (``""``: the whole server)."""
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def fill_disk(disk: pathlib.Path, name: str = "filler") -> pathlib.Path:
    """Writes a file on ``disk`` until the file system has no block left; returns its path.

    Removing the file gives the space back.
    """
    filler = disk / name
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as file:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    file.write(chunk[:size])
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
    return filler


def fill_journal(client: StoreClient, key: str = "probes/filler") -> None:
    """Stores values under ``key`` until even a one-byte value is refused (on a full disk).

    Afterwards no change, however small, fits in the journal's last page, so
    every change the store is asked for fails for want of space.
    """
    size = 4096
    while size >= 1:
        revision = client.get_state(key).revision
        try:
            client.compare_and_set_state(key, revision, b"x" * size)
        except ResourceExhaustedError:
            size //= 2


def read_all(client: StoreClient, segment: str) -> list[bytes]:
    """Every event of ``segment`` from its start to its write offset now."""
    end = client.segment_info(segment).write_offset
    return [
        frame.payload
        for result in read_range(client, SegmentRange(segment, 0, end))
        for frame in iter_frames(result.data)
    ]


def append_until_full(
    client: StoreClient, segment: str, size: int, first: int, writer: str = "writer"
) -> tuple[list[bytes], ResourceExhaustedError]:
    """Appends events of ``size`` bytes until the store refuses one; returns those it took."""
    stored: list[bytes] = []
    for number in range(first, first + 10_000):
        event = number.to_bytes(4, "big") * (size // 4)
        try:
            client.append(segment, writer, number, [event])
        except ResourceExhaustedError as refused:
            return stored, refused
        stored.append(event)
    msg = f"the disk took {len(stored)} events of {size} bytes and never filled"
    raise AssertionError(msg)


def flip_stored_bit(server: StoreServer, segment: str, offset: int) -> None:
    """Flips a bit of the byte at ``offset`` of ``segment``'s data, as the server reads it.

    On the file store in its data file; on JetStream in the payload cache of
    the server, where a replica's corrupt answer would land.
    """
    if isinstance(server.store, SegmentStore):
        path = segment_inside(server, segment).data_path  # type: ignore[attr-defined]
        with open(path, "r+b") as file:
            file.seek(offset)
            byte = file.read(1)[0]
            file.seek(offset)
            file.write(bytes([byte ^ 0x04]))
        return
    engine = server.store.engine  # type: ignore[attr-defined]
    follower, target = engine._segment(segment)  # type: ignore[attr-defined]  # noqa: SLF001
    [(seq, start, _)] = target.messages_between(offset, offset + 1)
    cache = engine._cache  # type: ignore[attr-defined]  # noqa: SLF001
    payload = bytearray(cache.get(follower.stream_name, seq))
    payload[offset - start] ^= 0x04
    cache.put(follower.stream_name, seq, bytes(payload))
