"""A full disk: nothing acknowledged that is not stored, reads go on, writes resume, restarts work.

The store runs as a server process on a 4 MiB tmpfs (tests run as root), and
in-process with a write that fails part-way, for the journal's side.
"""

from __future__ import annotations

import errno
import os
import pathlib
import signal

import pytest

from connector import StoreClient, StreamManager
from connector.errors import ResourceExhaustedError
from connector.framing import iter_frames
from connector.reader.planning import SegmentRange, read_range
from connector.store import SegmentStore, StoreConfig
from connector.store import disk as disk_module

pytestmark = pytest.mark.slow

SEGMENT = "r/s/0"


def _read_all(client: StoreClient, segment: str) -> list[bytes]:
    end = client.segment_info(segment).write_offset
    return [
        frame.payload
        for result in read_range(client, SegmentRange(segment, 0, end))
        for frame in iter_frames(result.data)
    ]


def _fill(client: StoreClient, size: int, first: int) -> tuple[list[bytes], ResourceExhaustedError]:
    """Appends events of ``size`` bytes until the store refuses one; returns those it took."""
    stored: list[bytes] = []
    for number in range(first, first + 10_000):
        event = number.to_bytes(4, "big") * (size // 4)
        try:
            client.append(SEGMENT, "writer", number, [event])
        except ResourceExhaustedError as refused:
            return stored, refused
        stored.append(event)
    msg = f"a 4 MiB disk took {len(stored)} events of {size} bytes"
    raise AssertionError(msg)


def test_a_full_disk_loses_nothing_acknowledged_and_recovers_without_restart(
    small_disk: pathlib.Path, spawn_server
) -> None:
    data_dir = small_disk / "data"
    server = spawn_server(data_dir)
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("r")
        StreamManager(client).create_stream("r", "s", segment_count=1)
        filler = small_disk / "filler"
        filler.write_bytes(b"\0" * (2 * 1024 * 1024))

        big, refused = _fill(client, 64 * 1024, first=0)
        assert big, "some 64 KiB events fit before the disk filled"
        assert "out of disk space" in str(refused) and str(small_disk) not in str(refused)
        small, _ = _fill(client, 100, first=len(big))  # the last pages: data or journal fills
        acknowledged = big + small
        assert _read_all(client, SEGMENT) == acknowledged, "reads go on, with what was acknowledged"
        assert client.segment_info(SEGMENT).write_offset > 0

        filler.unlink()  # space comes back: the same process takes writes again
        result = client.append(SEGMENT, "writer", len(acknowledged), [b"after"])
        assert result.appended == 1
        acknowledged.append(b"after")
        assert _read_all(client, SEGMENT) == acknowledged

    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    restarted = spawn_server(data_dir)
    with StoreClient(restarted.uri, retry_timeout_s=2.0) as client:
        assert _read_all(client, SEGMENT) == acknowledged


def test_a_restart_on_a_still_full_disk_succeeds(small_disk: pathlib.Path, spawn_server) -> None:
    data_dir = small_disk / "data"
    server = spawn_server(data_dir)
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("r")
        StreamManager(client).create_stream("r", "s", segment_count=1)
        acknowledged, _ = _fill(client, 64 * 1024, first=0)
        more, _ = _fill(client, 100, first=len(acknowledged))
        acknowledged += more
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    restarted = spawn_server(data_dir)
    with StoreClient(restarted.uri, retry_timeout_s=2.0) as client:
        assert _read_all(client, SEGMENT) == acknowledged


class _FailingWrites:
    """``os.write`` for the store's files that writes ``partial`` bytes, then fails with ENOSPC."""

    def __init__(self, partial: int):
        self.partial = partial
        self.armed = False
        self.real = os.write

    def __call__(self, fd: int, data: bytes) -> int:
        if not self.armed:
            return self.real(fd, data)
        if self.partial:
            count, self.partial = self.real(fd, bytes(data[: self.partial])), 0
            return count
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("partial", [0, 7])
def test_a_failed_journal_write_is_cut_back_and_later_changes_survive_a_restart(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, clock, partial: int
) -> None:
    config = StoreConfig(data_dir=str(tmp_path / "data"), clock=clock, polling_period_ms=None)
    store = SegmentStore(config)
    store.create_scope("r")
    store.create_stream("r", "s", 1)
    store.append(SEGMENT, "w", 0, [b"zero"])
    journal = tmp_path / "data" / "journal.log"
    size = journal.stat().st_size
    failing = _FailingWrites(partial)
    monkeypatch.setattr(disk_module.os, "write", failing)
    # The data file's write goes through first; the journal's then fails part-way.
    real_sync = store._journal.sync

    def failing_journal_sync() -> None:
        failing.armed = True
        try:
            real_sync()
        finally:
            failing.armed = False

    monkeypatch.setattr(store._journal, "sync", failing_journal_sync)
    with pytest.raises(ResourceExhaustedError, match="out of disk space"):
        store.append(SEGMENT, "w", 1, [b"one"])
    assert journal.stat().st_size == size, "no torn record stays in the journal"
    monkeypatch.undo()
    assert store.compare_and_set_state("readergroup/r/g", 0, b"state")[0]
    store.append(SEGMENT, "w", 1, [b"one again"])
    assert store.read(SEGMENT, 0, 1 << 20).next_offset == store.segment_info(SEGMENT).write_offset
    store.close()

    reopened = SegmentStore(config)
    data = reopened.read(SEGMENT, 0, 1 << 20).data
    assert [f.payload for f in iter_frames(data)] == [b"zero", b"one again"]
    assert reopened.get_state("readergroup/r/g").revision == 1
    reopened.close()
