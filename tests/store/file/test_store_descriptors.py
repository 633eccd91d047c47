"""File descriptors: a store holds more segments than open files and restarts under its limit.

The server runs as a subprocess whose descriptor limit is lowered to 128
(the test process keeps its own, however many descriptors it holds);
the store then creates, writes, reads and replays thousands of segments.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from connector import StoreClient
from connector.errors import ResourceExhaustedError
from connector.framing import iter_frames
from connector.store import SegmentStore, StoreConfig
from connector.store.file.open_files import OpenFiles

pytestmark = pytest.mark.slow

LIMIT = 128
STREAMS = 24
SEGMENTS = 64


def _open_files_limit(pid: int) -> int:
    """The soft descriptor limit a process runs under, as the kernel reports it."""
    for line in pathlib.Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    message = f"no 'Max open files' line for process {pid}"
    raise AssertionError(message)


def _payloads(client: StoreClient, segment: str) -> list[bytes]:
    result = client.read(segment, 0, max_bytes=1 << 20)
    return [frame.payload for frame in iter_frames(result.data)]


def test_thousands_of_segments_under_a_low_descriptor_limit(
    tmp_path: pathlib.Path, spawn_server
) -> None:
    data_dir = tmp_path / "data"
    server = spawn_server(data_dir, open_files_limit=LIMIT)
    assert _open_files_limit(server.process.pid) == LIMIT
    names = []
    with StoreClient(server.uri) as client:
        client.create_scope("fd")
        for number in range(STREAMS):
            description = client.create_stream("fd", f"s{number}", SEGMENTS)
            names += [segment.segment for segment in description.segments]
        for name in names:
            client.append(name, "w", 0, [name.encode()])
        client.seal_stream("fd", "s0")
        for name in names:
            assert _payloads(client, name) == [name.encode()]
    server.process.kill()
    server.process.wait(timeout=10)

    restarted = spawn_server(data_dir, open_files_limit=LIMIT)
    with StoreClient(restarted.uri) as client:
        assert len(client.describe_stream("fd", f"s{STREAMS - 1}").segments) == SEGMENTS
        for name in names:
            assert _payloads(client, name) == [name.encode()]
        client.append(names[-1], "w", 1, [b"after the restart"])
        assert _payloads(client, names[-1])[-1] == b"after the restart"


def test_open_files_keep_at_most_the_limit_idle(tmp_path: pathlib.Path) -> None:
    files = OpenFiles(limit=4)
    paths = [str(tmp_path / f"{n}.events") for n in range(10)]
    for path in paths:
        with files.borrow(path, writable=True) as fd:
            os.write(fd, path.encode())
    assert files.open_count() == 4
    with files.borrow(paths[0]) as first, files.borrow(paths[1]) as second:
        assert os.pread(first, 100, 0) == paths[0].encode()
        assert os.pread(second, 100, 0) == paths[1].encode()
    files.close()
    assert files.open_count() == 0


def test_a_borrowed_descriptor_is_never_closed_under_its_user(tmp_path: pathlib.Path) -> None:
    files = OpenFiles(limit=1)
    first, other = str(tmp_path / "a"), str(tmp_path / "b")
    with files.borrow(first, writable=True) as fd:
        with files.borrow(other, writable=True):
            pass
        os.write(fd, b"still open")
    with files.borrow(first) as fd:
        assert os.pread(fd, 100, 0) == b"still open"
    files.close()


def test_the_store_refuses_segments_past_its_limit(tmp_path: pathlib.Path) -> None:
    config = StoreConfig(str(tmp_path), polling_period_ms=None, max_segments=10)
    with SegmentStore(config) as store:
        store.create_scope("fd")
        store.create_stream("fd", "a", 8)
        with pytest.raises(ResourceExhaustedError, match="limit is 10"):
            store.create_stream("fd", "b", 3)
        with pytest.raises(ResourceExhaustedError, match="limit is 10"):
            store.scale_stream("fd", "a", [0], split_count=3)
        store.scale_stream("fd", "a", [0], split_count=2)
        assert store.stream_ids() == [("fd", "a")]
