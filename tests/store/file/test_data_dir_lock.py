"""One store per data dir: a second one is refused, naming the dir and the holder's pid.

Issue 21, finding 5: a second ``tidemark-server --data-dir D`` started while
the first served D; both acknowledged appends at the same offsets, and a
restart cut acknowledged events off.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

from connector import StoreClient, StreamManager
from connector.errors import DataDirDamagedError, DataDirLockedError
from connector.store import SegmentStore, StoreConfig
from tests.store import payloads

LOCKED_EXIT_CODE = 3


def _second_server(data_dir: pathlib.Path) -> tuple[int, str]:
    """Starts ``tidemark-server`` on ``data_dir``; returns its exit code and stderr.

    Fails the test if it starts serving instead of exiting.
    """
    command = [sys.executable, "-m", "connector.server", "--data-dir", str(data_dir)]
    command += ["--listen", "127.0.0.1:0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"a second server started on {data_dir}: {out!r}")
    return process.returncode, err


def _write(uri: str, events: list[bytes]) -> None:
    with StoreClient(uri) as client:
        client.append("d/s/0", "w", len(payloads(client, "d/s/0")), events)


@pytest.mark.slow
def test_a_second_server_on_a_data_dir_in_use_is_refused_naming_it_and_the_holder(
    tmp_path, spawn_server
):
    data_dir = tmp_path / "data"
    first = spawn_server(data_dir)
    with StoreClient(first.uri) as client:
        StreamManager(client).create_scope("d")
        StreamManager(client).create_stream("d", "s", segment_count=1)
    _write(first.uri, [b"a", b"b"])

    code, stderr = _second_server(data_dir)

    assert code == LOCKED_EXIT_CODE, stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("tidemark-server: error: ")
    assert repr(str(data_dir)) in last and f"pid {first.process.pid}" in last
    _write(first.uri, [b"c"])  # the first server goes on serving, alone
    with StoreClient(first.uri) as client:
        assert payloads(client, "d/s/0") == [b"a", b"b", b"c"]


@pytest.mark.slow
def test_a_server_killed_with_sigkill_leaves_no_lock_behind(tmp_path, spawn_server):
    data_dir = tmp_path / "data"
    first = spawn_server(data_dir)
    with StoreClient(first.uri) as client:
        StreamManager(client).create_scope("d")
        StreamManager(client).create_stream("d", "s", segment_count=1)
    _write(first.uri, [b"before"])
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=10)

    second = spawn_server(data_dir)  # the lock file is still there; its holder is gone

    _write(second.uri, [b"after"])
    with StoreClient(second.uri) as client:
        assert payloads(client, "d/s/0") == [b"before", b"after"]
    assert "cutting" not in second.log()


def test_an_embedded_store_holds_the_lock_until_it_is_closed(tmp_path, clock):
    config = StoreConfig(str(tmp_path / "data"), clock=clock, polling_period_ms=None)
    first = SegmentStore(config)
    with pytest.raises(DataDirLockedError) as refused:
        SegmentStore(config)
    assert refused.value.data_dir == config.data_dir
    assert refused.value.holder_pid == os.getpid()
    first.close()
    first.close()  # closing twice is harmless, and releases nothing twice
    with SegmentStore(config) as again:
        assert again.scopes() == []


def test_a_store_that_fails_to_open_releases_the_lock(tmp_path, clock):
    config = StoreConfig(str(tmp_path / "data"), clock=clock, polling_period_ms=None)
    with SegmentStore(config) as store:
        store.create_scope("d")
        store.create_stream("d", "s", 1)
        store.append("d/s/0", "w", 0, [b"x" * 100])
    data_file = pathlib.Path(config.data_dir) / "segments" / "d" / "s" / "0.events"
    os.truncate(data_file, 10)  # less than was committed: the store refuses to start
    for _ in range(2):  # the second refusal is the same, not "locked"
        with pytest.raises(DataDirDamagedError) as refused:
            SegmentStore(config)
        assert not isinstance(refused.value, DataDirLockedError)
