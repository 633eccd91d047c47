"""``tidemarkctl`` commands that create, delete, write and measure, against a real server."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
from click.testing import CliRunner, Result

from connector import BytesSerializer, JsonSerializer, StoreClient, StreamManager
from connector.cli import cli
from connector.client.routing import key_position
from connector.clock import ManualClock
from connector.framing import iter_frames
from connector.reader import ReaderGroupResetError
from connector.reader.group import ReaderGroupManager
from connector.server import StoreServer
from tests.conftest import CLOCK_START_MS, wait_until
from tests.readme import shell, shell_env


def run(uri: str, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "--uri", uri, "--timeout", "2"], input=stdin)


def ok_json(uri: str, *args: str, stdin: str | None = None) -> dict:
    result = run(uri, *args, "-o", "json", stdin=stdin)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def client(store_server: StoreServer) -> StoreClient:
    with StoreClient(store_server.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("iot")
        StreamManager(client).create_stream("iot", "s", segment_count=2)
        yield client


def test_scope_delete_refuses_a_scope_that_holds_anything(
    store_server: StoreServer, client: StoreClient
) -> None:
    uri = store_server.uri
    assert run(uri, "scope", "create", "empty").exit_code == 0
    assert ok_json(uri, "scope", "delete", "empty") == {"deleted": "empty", "existed": True}
    assert "empty" not in ok_json(uri, "scope", "list")["scopes"]
    missing = run(uri, "scope", "delete", "empty")
    assert missing.exit_code == 3 and "'empty'" in missing.stderr
    assert ok_json(uri, "scope", "delete", "empty", "--if-exists")["existed"] is False

    held = run(uri, "scope", "delete", "iot")
    assert held.exit_code == 5
    assert held.stderr.startswith("tidemarkctl: error: scope 'iot' is not empty")
    assert "stream iot/s" in held.stderr


def test_readergroup_create_and_delete_and_the_readers_of_a_deleted_group_fail(
    store_server: StoreServer, client: StoreClient
) -> None:
    uri = store_server.uri
    made = ok_json(uri, "readergroup", "create", "iot/g", "--stream", "iot/s")
    assert made == {"group": "iot/g", "streams": ["iot/s"], "created": True}
    assert run(uri, "readergroup", "create", "iot/g", "--stream", "iot/s").exit_code == 4
    kept = ok_json(uri, "readergroup", "create", "iot/g", "--stream", "iot/s", "--if-not-exists")
    assert kept["created"] is False
    assert run(uri, "readergroup", "create", "iot/h", "--stream", "iot/nope").exit_code == 3

    group = ReaderGroupManager(client).get_reader_group("iot", "g")
    reader = group.create_reader("r1", JsonSerializer())
    client.append("iot/s/0", "w", 0, [b'{"n": 1}'])
    assert reader.read_next_event(timeout_ms=5_000).event == {"n": 1}

    assert ok_json(uri, "readergroup", "delete", "iot/g") == {"deleted": "iot/g", "existed": True}
    assert ok_json(uri, "readergroup", "list", "iot")["readergroups"] == []
    with pytest.raises(ReaderGroupResetError):
        for _ in range(100):  # bounded: a reader notices at its next sync with the group
            reader.read_next_event(timeout_ms=50)
    reader.close()
    assert run(uri, "readergroup", "delete", "iot/g").exit_code == 3
    assert ok_json(uri, "readergroup", "delete", "iot/g", "--if-exists")["existed"] is False

    # The name is free: a new group starts afresh, from the first event.
    ok_json(uri, "readergroup", "create", "iot/g", "--stream", "iot/s")
    fresh = ReaderGroupManager(client).get_reader_group("iot", "g")
    with fresh.create_reader("r2", JsonSerializer()) as again:
        assert again.read_next_event(timeout_ms=5_000).event == {"n": 1}


def test_readergroup_describe_shows_unread_events_and_the_processing_time_watermarks(
    store_server: StoreServer, client: StoreClient, clock: ManualClock
) -> None:
    uri = store_server.uri
    ok_json(uri, "readergroup", "create", "iot/g", "--stream", "iot/s")
    start = json.loads(run(uri, "readergroup", "describe", "iot/g", "--json").stdout)
    assert start["unread_events"] == 0
    assert start["processing_time_watermark"] == CLOCK_START_MS - 1  # empty: its watermark
    clock.advance(1_000)
    client.append("iot/s/0", "w", 0, [b"a", b"b", b"c"])
    clock.advance(2_000)
    client.append("iot/s/0", "w", 3, [b"d"])
    client.append("iot/s/1", "w", 0, [b"e"])

    described = ok_json(uri, "readergroup", "describe", "iot/g")
    by_segment = {s["segment"]: s for s in described["segments"]}
    zero, one = by_segment["iot/s/0"], by_segment["iot/s/1"]
    assert (zero["offset"], zero["unread_events"]) == (0, 4)
    assert zero["tail"] == client.segment_info("iot/s/0").write_offset
    assert zero["watermark"] == CLOCK_START_MS - 1
    # The oldest unread event of segment 0 was ingested at +1 s, of segment 1 at +3 s.
    assert zero["processing_time_watermark"] == CLOCK_START_MS + 1_000 - 1
    assert zero["processing_time_delay_ms"] == 2_001
    assert one["processing_time_watermark"] == CLOCK_START_MS + 3_000 - 1
    assert one["unread_events"] == 1 and one["tail"] == client.segment_info("iot/s/1").write_offset
    assert described["unread_events"] == 5
    assert (described["processing_time_watermark"], described["processing_time_delay_ms"]) == (
        CLOCK_START_MS + 999,
        2_001,
    )
    # No writer asserts event time: the group's watermark is its event time.
    assert described["event_time_watermark"] == described["watermark"] == CLOCK_START_MS - 1
    assert described["event_time_delay_ms"] == described["delay_ms"] == 3_001
    assert described["diagnosis"] == "healthy"

    text = run(uri, "readergroup", "describe", "iot/g").stdout
    assert "TAIL" in text and "UNREAD" in text and "PROCESSING-TIME" in text
    assert "5 unread events" in text and "healthy" in text

    group = ReaderGroupManager(client).get_reader_group("iot", "g")
    with group.create_reader("r1", BytesSerializer(), sync_interval_ms=0) as reader:
        read = 0
        for _ in range(200):  # bounded
            if reader.read_next_event(timeout_ms=50) is not None:
                read += 1
            if read == 5:
                break
        assert read == 5
    caught_up = ok_json(uri, "readergroup", "describe", "iot/g")
    assert caught_up["unread_events"] == 0
    assert caught_up["processing_time_watermark"] == CLOCK_START_MS + 3_000 - 1  # the tails'
    assert all(s["offset"] == s["tail"] for s in caught_up["segments"])


def test_stream_describe_shows_sizes_tail_offsets_and_what_a_truncation_left(
    store_server: StoreServer, client: StoreClient
) -> None:
    uri = store_server.uri
    client.append("iot/s/0", "w", 0, [b"x" * 10, b"y" * 20])
    client.append("iot/s/1", "w", 0, [b"z"])
    described = ok_json(uri, "stream", "describe", "iot/s")
    by_segment = {s["segment"]: s for s in described["segments"]}
    info = client.segment_info("iot/s/0")
    tail0 = info.write_offset
    zero = by_segment["iot/s/0"]
    assert (zero["first_offset"], zero["tail_offset"], zero["bytes"]) == (0, tail0, tail0)
    assert (zero["events"], zero["watermark"]) == (2, info.watermark)
    assert by_segment["iot/s/1"]["events"] == 1
    assert (described["events"], described["bytes"]) == (3, tail0 + by_segment["iot/s/1"]["bytes"])

    first = client.read("iot/s/0", 0, max_bytes=1).next_offset  # after the first event
    client.truncate_stream("iot", "s", {0: first})
    after = {s["segment"]: s for s in ok_json(uri, "stream", "describe", "iot/s")["segments"]}
    assert after["iot/s/0"]["first_offset"] == first
    assert (after["iot/s/0"]["events"], after["iot/s/0"]["bytes"]) == (1, tail0 - first)
    text = run(uri, "stream", "describe", "iot/s").stdout
    assert "TAIL" in text and "EVENTS" in text and "iot/s: 2 events" in text


def _events(client: StoreClient, segment: str) -> list[tuple[str | None, bytes]]:
    data = client.read(segment, 0, max_bytes=1 << 20).data
    return [(f.routing_key, f.payload) for f in iter_frames(data)]


def test_stream_write_stores_each_line_with_its_routing_key_through_a_shell(
    store_server: StoreServer, client: StoreClient, tmp_path: pathlib.Path
) -> None:
    lines = [f'{{"sensor": "{s}", "seq": {n}}}' for n in range(5) for s in "ABC"]
    (tmp_path / "readings.jsonl").write_text("\n".join(lines) + "\n\n")
    command = (
        f"tidemarkctl stream write iot/s --key-field sensor --uri {store_server.uri} "
        "< readings.jsonl"
    )
    done = shell(command, tmp_path)
    assert (done.returncode, done.stdout) == (0, "wrote 15 events to iot/s\n"), done.stderr
    stored = _events(client, "iot/s/0") + _events(client, "iot/s/1")
    assert len(stored) == 15
    for sensor in "ABC":  # each key's lines in the order written, keyed by their field
        mine = [payload.decode() for key, payload in stored if key == sensor]
        assert mine == [line for line in lines if f'"{sensor}"' in line]


def test_stream_write_stops_at_a_bad_line_naming_it_after_storing_the_lines_before(
    store_server: StoreServer, client: StoreClient
) -> None:
    good = '{"sensor": "A", "seq": 1}\n{"sensor": "B", "seq": 2}\n'
    refused = run(
        store_server.uri,
        "stream",
        "write",
        "iot/s",
        "--key-field",
        "sensor",
        stdin=good + '{"seq": 3}\n{"sensor": "C"}\n',
    )
    assert refused.exit_code == 2
    assert refused.stderr == (
        "tidemarkctl: error: line 3 has no string or integer field 'sensor' for "
        "--key-field: '{\"seq\": 3}' (2 events before it were stored)\n"
    )
    stored = _events(client, "iot/s/0") + _events(client, "iot/s/1")
    assert sorted(key for key, _ in stored) == ["A", "B"]

    for line, said in [("not json", "is not JSON"), ("[1, 2]", "is not a JSON object")]:
        bad = run(store_server.uri, "stream", "write", "iot/s", "--key-field", "sensor", stdin=line)
        assert bad.exit_code == 2
        assert bad.stderr == (
            f"tidemarkctl: error: line 1 {said}, and --key-field reads "
            f"{'a JSON object' if said == 'is not JSON' else 'one'}: {line!r} "
            "(0 events before it were stored)\n"
        )

    one_key = ok_json(store_server.uri, "stream", "write", "iot/s", "--key", "K", stdin="x\ny\n")
    assert one_key == {"stream": "iot/s", "events": 2}
    both = run(store_server.uri, "stream", "write", "iot/s", "--key", "K", "--key-field", "f")
    assert both.exit_code == 2


def test_a_write_the_store_refuses_ends_with_its_reason_and_what_was_stored_not_python_advice(
    store_server: StoreServer, client: StoreClient
) -> None:
    too_large = "x" * (1024 * 1024 + 1)  # over the store's default --max-event-size
    refused = run(
        store_server.uri, "stream", "write", "iot/s", "--key", "K", stdin=f"a\nb\n{too_large}\n"
    )
    assert refused.exit_code == 5, refused.stderr
    [line] = refused.stderr.splitlines()
    assert line.startswith("tidemarkctl: error: event ") and "over the limit of 1048576" in line
    assert line.endswith(" (2 events before it were stored)"), line
    assert "flush()" not in line and "discard_pending" not in line
    stored = _events(client, "iot/s/0") + _events(client, "iot/s/1")
    assert [payload for _, payload in stored] == [b"a", b"b"]


def test_stream_write_stores_lines_as_they_arrive_from_a_pipe(
    store_server: StoreServer, client: StoreClient
) -> None:
    command = ["tidemarkctl", "stream", "write", "iot/s", "--key", "k", "--uri", store_server.uri]
    segment = next(
        s.segment
        for s in client.describe_stream("iot", "s").segments
        if s.key_low <= key_position("k") < s.key_high
    )
    writer = subprocess.Popen(command, stdin=subprocess.PIPE, env=shell_env())
    try:
        assert writer.stdin is not None
        writer.stdin.write(b"first\n")
        writer.stdin.flush()
        # Stored while the input stays open: a line is not held back for more to come.
        wait_until(lambda: _events(client, segment), 30, what="the first line stored")
        writer.stdin.write(b"second\n")
        writer.stdin.close()
        assert writer.wait(timeout=30) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(timeout=10)
    assert [p for _, p in _events(client, segment)] == [b"first", b"second"]
