"""Truncating a stream at a cut: data before it is gone, readers are told, disk is freed."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from click.testing import CliRunner

from connector import EventWriter, StoreClient, StreamManager
from connector.cli import cli
from connector.client.serializers import BytesSerializer
from connector.errors import InvalidArgumentError, NotFoundError, TruncatedError
from connector.framing import iter_frames
from connector.reader.group import ReaderGroupManager

pytestmark = pytest.mark.storages("file", "jetstream")


def _append(client: StoreClient, segment: str, writer: str, first: int, count: int) -> int:
    events = [f"{segment}-{first + i}".encode() for i in range(count)]
    return client.append(segment, writer, first, events).write_offset


def _payloads(client: StoreClient, segment: str, offset: int) -> list[bytes]:
    read = client.read(segment, offset, max_bytes=1 << 20)
    return [frame.payload for frame in iter_frames(read.data, offset)]


@pytest.fixture
def client(store_client: StoreClient) -> StoreClient:
    StreamManager(store_client).create_scope("t")
    return store_client


def test_reads_before_a_cut_fail_naming_the_first_readable_offset(client, store_server):
    client.create_stream("t", "s", 1)
    middle = _append(client, "t/s/0", "w", 0, 5)
    end = _append(client, "t/s/0", "w", 5, 5)
    result = client.truncate_stream("t", "s", {0: middle})
    assert result.removed_segments == () and result.bytes_freed == 0

    gone = f"offset 0 is gone, the first readable offset is {middle}"
    with pytest.raises(TruncatedError, match=gone) as caught:
        client.read("t/s/0", 0)
    assert (caught.value.segment, caught.value.first_offset) == ("t/s/0", middle)
    with pytest.raises(TruncatedError):
        client.plan_read("t/s/0", 0, max_events=1)
    assert _payloads(client, "t/s/0", middle) == [f"t/s/0-{i}".encode() for i in range(5, 10)]
    assert client.read("t/s/0", end).next_offset == end
    # An earlier cut changes nothing; appends go on after a truncation.
    client.truncate_stream("t", "s", {0: 0})
    with pytest.raises(TruncatedError):
        client.read("t/s/0", 0)
    assert _append(client, "t/s/0", "w", 10, 1) > end


@pytest.mark.storages("file")
def test_segments_wholly_before_the_cut_lose_their_files_and_keep_their_lineage(
    client, data_dir: pathlib.Path
):
    client.create_stream("t", "s", 1)
    _append(client, "t/s/0", "w", 0, 100)
    client.scale_stream("t", "s", [0], split_count=2)
    tail_1 = _append(client, "t/s/1", "w", 0, 3)
    tail_2 = _append(client, "t/s/2", "w", 0, 3)
    old_file = data_dir / "segments" / "t" / "s" / "0.events"
    size = os.path.getsize(old_file)

    only_one = client.truncate_stream("t", "s", {1: 0})  # segment 2 still needs 0's data
    assert only_one.removed_segments == ()
    assert old_file.exists()

    result = client.truncate_stream("t", "s", {1: tail_1, 2: tail_2})
    assert result.removed_segments == ("t/s/0",)
    assert result.bytes_freed == size
    assert not old_file.exists()
    with pytest.raises(TruncatedError) as caught:
        client.read("t/s/0", 0)
    assert caught.value.first_offset == size
    at_end = client.read("t/s/0", size)  # a reader at its end still finds its successors
    assert at_end.end_of_segment and set(at_end.successors) == {"t/s/1", "t/s/2"}
    assert [s.segment for s in client.describe_stream("t", "s").segments] == [
        "t/s/0",
        "t/s/1",
        "t/s/2",
    ]


def test_a_truncation_survives_a_restart_and_a_compaction(start_store, clock, data_dir):
    server = start_store(compact_after_records=1)
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("t")
        client.create_stream("t", "s", 1)
        _append(client, "t/s/0", "w", 0, 10)
        client.scale_stream("t", "s", [0], split_count=2)
        middle = _append(client, "t/s/1", "w", 0, 4)
        _append(client, "t/s/1", "w", 4, 4)
        client.truncate_stream("t", "s", {1: middle, 2: 0})
        _append(client, "t/s/2", "w", 0, 1)  # one more group: the journal is compacted
    server.stop()
    for _ in range(2):  # a restart after compaction, then one replaying it
        again = start_store(compact_after_records=1)
        with StoreClient(again.uri) as client:
            with pytest.raises(TruncatedError):
                client.read("t/s/1", 0)
            with pytest.raises(TruncatedError):
                client.read("t/s/0", 0)
            assert _payloads(client, "t/s/1", middle) == [
                f"t/s/1-{i}".encode() for i in range(4, 8)
            ]
        again.stop()


def test_bad_cuts_are_refused_naming_the_bad_value(client):
    client.create_stream("t", "s", 1)
    end = _append(client, "t/s/0", "w", 0, 3)
    with pytest.raises(InvalidArgumentError, match="not at an event boundary"):
        client.truncate_stream("t", "s", {0: 5})
    with pytest.raises(InvalidArgumentError, match=f"offset {end + 1} is outside segment 't/s/0'"):
        client.truncate_stream("t", "s", {0: end + 1})
    with pytest.raises(NotFoundError, match="t/s/7"):
        client.truncate_stream("t", "s", {7: 0})
    with pytest.raises(InvalidArgumentError, match="needs a cut"):
        client.truncate_stream("t", "s", {})
    assert client.read("t/s/0", 0).next_offset == end  # nothing was truncated


def test_a_reader_positioned_on_truncated_data_fails_naming_the_segment(client):
    client.create_stream("t", "s", 1)
    with EventWriter(client, "t/s", BytesSerializer()) as writer:
        for n in range(6):
            writer.write_event(f"e{n}".encode())
    groups = ReaderGroupManager(client)
    groups.create_reader_group("t", "g", ["t/s"], start="earliest")
    middle = client.segment_info("t/s/0").write_offset
    client.truncate_stream("t", "s", {0: middle})
    with groups.get_reader_group("t", "g").create_reader("r", BytesSerializer()) as reader:
        with pytest.raises(TruncatedError, match="t/s/0") as caught:
            for _ in range(10):
                reader.read_next_event(timeout_ms=2_000)
    assert caught.value.first_offset == middle


def test_the_cli_truncates_at_the_tail_or_at_a_cut(client, store_server):
    client.create_stream("t", "s", 2)
    end_0 = _append(client, "t/s/0", "w", 0, 4)
    end_1 = _append(client, "t/s/1", "w", 0, 2)

    def run(*args: str):
        return CliRunner().invoke(cli, ["--uri", store_server.uri, "--timeout", "2", *args])

    refused = run("stream", "truncate", "t/s")
    assert refused.exit_code == 2 and "--at-tail" in refused.output
    bad = run("stream", "truncate", "t/s", "--cut", "0:5")
    assert bad.exit_code == 2 and "'0:5'" in bad.output
    at_cut = run("stream", "truncate", "t/s", "--cut", "1=0")
    assert at_cut.exit_code == 0, at_cut.output
    at_tail = run("--json", "stream", "truncate", "t/s", "--at-tail")
    assert at_tail.exit_code == 0, at_tail.output
    assert json.loads(at_tail.output)["cut"] == {"0": end_0, "1": end_1}
    with pytest.raises(TruncatedError):
        client.read("t/s/0", 0)
