"""The ``tidemarkctl`` command after ``stream truncate --at-tail``: "earliest" is the data left.

Runs the installed ``tidemarkctl`` console script against a server process.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from connector import JsonSerializer, StoreClient
from connector.reader.group import ReaderGroupManager
from tests.truncation import truncated_stream

pytestmark = pytest.mark.slow

TIDEMARK = pathlib.Path(sys.executable).with_name("tidemarkctl")


def tidemark(uri: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TIDEMARK), "--uri", uri, "--timeout", "5", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def server(spawn_server, tmp_path):
    return spawn_server(tmp_path / "data")


def test_readergroup_reset_to_earliest_after_truncate_at_tail_reads_what_is_left(server):
    def truncate() -> None:
        ReaderGroupManager(client).create_reader_group("t", "g", ["t/s"], start="earliest")
        done = tidemark(server.uri, "stream", "truncate", "t/s", "--at-tail")
        assert done.returncode == 0, done.stderr

    with StoreClient(server.uri) as client:
        kept = truncated_stream(client, "t", truncate=truncate)
        reset = tidemark(server.uri, "readergroup", "reset", "t/g", "--to", "earliest")
        assert reset.returncode == 0, reset.stderr
        group = ReaderGroupManager(client).get_reader_group("t", "g")
        events = []
        with group.create_reader("r", JsonSerializer()) as reader:
            for _ in range(len(kept) + 20):  # bounded: each read waits at most 500 ms
                read = reader.read_next_event(timeout_ms=500)
                if read is not None and read.is_event:
                    events.append(read.event)
                elif len(events) >= len(kept):
                    break
    assert sorted(events, key=lambda e: e["n"]) == kept


def test_stream_tail_from_start_after_truncate_at_tail_prints_what_is_left(server):
    with StoreClient(server.uri) as client:
        kept = truncated_stream(client, "t")
    tail = tidemark(
        server.uri,
        "--json",
        "stream",
        "tail",
        "t/s",
        "--from-start",
        "--no-watermarks",
        "--max-events",
        str(len(kept)),
        "--duration",
        "10",
    )
    assert tail.returncode == 0, tail.stderr
    events = [json.loads(json.loads(line)["payload"]) for line in tail.stdout.splitlines()]
    assert sorted(events, key=lambda e: e["n"]) == kept
