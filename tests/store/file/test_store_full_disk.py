"""A full disk: nothing acknowledged that is not stored, reads go on, writes resume, restarts work.

The store runs as a server process on a 4 MiB tmpfs (tests run as root), and
in-process with a write that fails part-way, for the journal's side.
"""

from __future__ import annotations

import errno
import os
import pathlib
import signal
import time

import grpc
import pytest

from connector import StoreClient, StreamManager
from connector.errors import ResourceExhaustedError
from connector.framing import iter_frames
from connector.ops.health import STORE_SERVICE
from connector.store import SegmentStore, StoreConfig
from connector.store.file import disk as disk_module
from tests.conftest import wait_until
from tests.probes import (
    NOT_SERVING,
    SERVING,
    append_until_full,
    fill_disk,
    health_of,
    metrics_address,
    read_all,
    scrape,
)

pytestmark = pytest.mark.slow

SEGMENT = "r/s/0"


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

        big, refused = append_until_full(client, SEGMENT, 64 * 1024, first=0)
        assert big, "some 64 KiB events fit before the disk filled"
        assert "out of disk space" in str(refused) and str(small_disk) not in str(refused)
        # The last pages: the data file or the journal fills.
        small, _ = append_until_full(client, SEGMENT, 100, first=len(big))
        acknowledged = big + small
        assert read_all(client, SEGMENT) == acknowledged, "reads go on, with what was acknowledged"
        assert client.segment_info(SEGMENT).write_offset > 0

        filler.unlink()  # space comes back: the same process takes writes again
        result = client.append(SEGMENT, "writer", len(acknowledged), [b"after"])
        assert result.appended == 1
        acknowledged.append(b"after")
        assert read_all(client, SEGMENT) == acknowledged

    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    restarted = spawn_server(data_dir)
    with StoreClient(restarted.uri, retry_timeout_s=2.0) as client:
        assert read_all(client, SEGMENT) == acknowledged


def test_a_restart_on_a_still_full_disk_succeeds(small_disk: pathlib.Path, spawn_server) -> None:
    data_dir = small_disk / "data"
    server = spawn_server(data_dir)
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("r")
        StreamManager(client).create_stream("r", "s", segment_count=1)
        acknowledged, _ = append_until_full(client, SEGMENT, 64 * 1024, first=0)
        more, _ = append_until_full(client, SEGMENT, 100, first=len(acknowledged))
        acknowledged += more
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    restarted = spawn_server(data_dir)
    with StoreClient(restarted.uri, retry_timeout_s=2.0) as client:
        assert read_all(client, SEGMENT) == acknowledged


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
    real_sync = store.engine._journal.sync

    def failing_journal_sync() -> None:
        failing.armed = True
        try:
            real_sync()
        finally:
            failing.armed = False

    monkeypatch.setattr(store.engine._journal, "sync", failing_journal_sync)
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


IDLE_SEGMENTS = 32
IDLE_LAG_MS = 200
IDLE_POLLING_MS = 50


def _failed_rounds(metrics: str, task: str) -> float:
    key = ("tidemark_background_task_failed_rounds_total", (("task", task),))
    return scrape(metrics)[key]


def test_idle_ticks_survive_a_full_disk_and_resume_once_space_returns(
    small_disk: pathlib.Path, spawn_server
) -> None:
    server = spawn_server(
        small_disk / "data",
        "--max-watermark-lag-ms",
        str(IDLE_LAG_MS),
        "--polling-period-ms",
        str(IDLE_POLLING_MS),
        "--metrics-listen",
        "127.0.0.1:0",
    )
    metrics = metrics_address(server)
    with (
        StoreClient(server.uri, retry_timeout_s=2.0) as client,
        grpc.insecure_channel(server.address) as channel,
    ):
        StreamManager(client).create_scope("idle")
        created = StreamManager(client).create_stream("idle", "s", segment_count=IDLE_SEGMENTS)
        segments = [s.segment for s in created.segments]

        def watermarks() -> dict[str, int]:
            return {s: client.segment_info(s).watermark for s in segments}

        def all_moved_past(before: dict[str, int]) -> bool:
            return all(w > before[s] for s, w in watermarks().items())

        created_at = watermarks()
        wait_until(lambda: all_moved_past(created_at), timeout=10, what="idle ticks")
        assert health_of(channel) == SERVING

        filler = fill_disk(small_disk)
        wait_until(
            lambda: _failed_rounds(metrics, "idle_ticks") >= 3,
            timeout=10,
            what="idle rounds failing on the full disk",
        )
        wait_until(lambda: health_of(channel) == NOT_SERVING, what="NOT_SERVING on a full disk")
        assert health_of(channel, STORE_SERVICE) == NOT_SERVING
        stuck = watermarks()
        failed = _failed_rounds(metrics, "idle_ticks")
        wait_until(
            lambda: _failed_rounds(metrics, "idle_ticks") >= failed + 5,
            timeout=10,
            what="failed idle rounds retried on their period",
        )
        assert watermarks() == stuck, "no tick is stored while the disk is full"
        stalled = ("tidemark_background_task_stalled", (("task", "idle_ticks"),))
        wait_until(lambda: scrape(metrics)[stalled] == 1, what="idle ticks reported stalled")
        task = f"background task 'idle_ticks' (every {IDLE_POLLING_MS} ms)"
        failures = [line for line in server.log().splitlines() if f"{task} is failing" in line]
        assert len(failures) == 1, f"one line for a run of failures with one cause: {failures}"
        assert "out of disk space" in failures[0]

        filler.unlink()  # no append, no restart: the ticks come back by themselves
        wait_until(lambda: all_moved_past(stuck), timeout=10, what="idle ticks after the disk")
        wait_until(lambda: health_of(channel) == SERVING, what="SERVING once ticks are stored")
        assert health_of(channel, STORE_SERVICE) == SERVING
        samples = scrape(metrics)
        assert samples[stalled] == 0
        last_success = samples[
            ("tidemark_background_task_last_success_timestamp_seconds", (("task", "idle_ticks"),))
        ]
        assert last_success > time.time() - 5
        assert f"{task} works again after" in server.log()


def test_a_change_that_writes_nothing_does_not_end_the_full_disk_state(
    small_disk: pathlib.Path, clock
) -> None:
    config = StoreConfig(data_dir=str(small_disk / "data"), clock=clock, polling_period_ms=None)
    with SegmentStore(config) as store:
        store.create_scope("r")
        store.create_stream("r", "s", 1)
        filler = fill_disk(small_disk)
        with pytest.raises(ResourceExhaustedError):
            for number in range(10_000):  # the journal's last page, then the refusal
                store.append(SEGMENT, "w", number, [b"e" * 1024])
        assert not store.accepting_writes
        assert store.compare_and_set_state("k", 7, b"stale")[0] is False  # stores nothing
        assert store.advance_idle_segments() == 0  # no tick due: stores nothing
        assert not store.accepting_writes, "nothing was stored: the disk is still full"
        filler.unlink()
        store.append(SEGMENT, "w", number, [b"e" * 1024])
        assert store.accepting_writes


def test_idle_ticks_refused_on_a_full_disk_are_due_again_at_once(
    small_disk: pathlib.Path, clock
) -> None:
    config = StoreConfig(data_dir=str(small_disk / "data"), clock=clock, polling_period_ms=None)
    with SegmentStore(config) as store:
        store.create_scope("r")
        store.create_stream("r", "s", IDLE_SEGMENTS)
        filler = fill_disk(small_disk)
        for _ in range(10_000):  # ticks fill the journal's last page, then are refused
            clock.advance(config.max_watermark_lag_ms + 1)
            try:
                store.advance_idle_segments()
            except ResourceExhaustedError:
                break
        watermark = store.segment_info(SEGMENT).watermark
        for _ in range(3):  # no time passes: the refused ticks are still due, not forgotten
            with pytest.raises(ResourceExhaustedError):
                store.advance_idle_segments()
        filler.unlink()
        assert store.advance_idle_segments() == IDLE_SEGMENTS
        assert store.segment_info(SEGMENT).watermark > watermark
