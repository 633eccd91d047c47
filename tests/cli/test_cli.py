"""The ``tidemarkctl`` command against a real server: each command, its errors and ``--json``."""

from __future__ import annotations

import json
import pathlib
import threading

import pytest
from click.testing import CliRunner

from connector import StoreClient, StreamManager
from connector.cli import cli
from connector.clock import ManualClock
from connector.reader.group import ReaderGroupManager
from connector.server import StoreServer
from tests.cli import ok_json, one_line, run
from tests.conftest import CLOCK_START_MS


def test_scope_and_stream_create_describe_scale_seal(store_server: StoreServer) -> None:
    uri = store_server.uri
    result = run(uri, "scope", "create", "ops")
    assert (result.exit_code, result.output) == (0, "scope ops created\n")
    exists = run(uri, "scope", "create", "ops")
    assert exists.exit_code == 4
    assert one_line(exists) == "tidemarkctl: error: scope 'ops' already exists"
    assert run(uri, "scope", "create", "ops", "--if-not-exists").exit_code == 0

    created = ok_json(uri, "stream", "create", "ops/s", "--segments", "2")
    assert created["name"] == "ops/s"
    assert [s["segment"] for s in created["segments"]] == ["ops/s/0", "ops/s/1"]
    human = run(uri, "stream", "describe", "ops/s")
    assert human.exit_code == 0 and "ops/s/1" in human.output and "open" in human.output

    split = ok_json(uri, "stream", "scale", "ops/s", "--split", "0", "--into", "2")
    assert [s["segment"] for s in split["segments"] if not s["sealed"]] == [
        "ops/s/1",
        "ops/s/2",
        "ops/s/3",
    ]
    merged = ok_json(uri, "stream", "scale", "ops/s", "--merge", "2", "--merge", "3")
    assert merged["segments"][-1]["predecessors"] == ["ops/s/2", "ops/s/3"]
    sealed = ok_json(uri, "stream", "seal", "ops/s")
    assert sealed["sealed"] is True and all(s["sealed"] for s in sealed["segments"])
    deleted = ok_json(uri, "stream", "delete", "ops/s")
    assert deleted == {"deleted": "ops/s", "existed": True}
    assert run(uri, "stream", "describe", "ops/s").exit_code == 3


def test_stream_delete_refuses_an_open_stream(store_server: StoreServer) -> None:
    uri = store_server.uri
    assert run(uri, "scope", "create", "ops").exit_code == 0
    assert run(uri, "stream", "create", "ops/open").exit_code == 0
    refused = run(uri, "stream", "delete", "ops/open")
    assert refused.exit_code == 5 and "ops/open" in one_line(refused)


def test_errors_are_one_line_naming_the_value_with_an_exit_code(
    store_server: StoreServer,
) -> None:
    uri = store_server.uri
    missing = run(uri, "stream", "describe", "ops/nope")
    assert missing.exit_code == 3
    assert one_line(missing) == "tidemarkctl: error: stream ops/nope does not exist"
    bad_name = run(uri, "stream", "describe", "no-slash")
    assert bad_name.exit_code == 2 and "'no-slash'" in bad_name.output
    no_scope = run(uri, "stream", "create", "ghost/s")
    assert no_scope.exit_code == 3 and "'ghost'" in one_line(no_scope)
    bad_count = run(uri, "stream", "create", "ops/s", "--segments", "0")
    assert bad_count.exit_code == 2 and "0" in bad_count.output
    scale = run(uri, "stream", "scale", "ops/s")
    assert scale.exit_code == 2 and "--split" in scale.output
    bad_uri = CliRunner().invoke(cli, ["--uri", f"{uri}?tokn=x", "scope", "create", "x"])
    assert bad_uri.exit_code == 2 and "'tokn'" in one_line(bad_uri)
    down = CliRunner().invoke(
        cli, ["--uri", "tidemark://127.0.0.1:1", "--timeout", "0.2", "scope", "create", "x"]
    )
    assert down.exit_code == 6
    assert "tidemark://127.0.0.1:1" in one_line(down)


def test_credentials_come_through_the_uri(store_server: StoreServer, tmp_path) -> None:
    missing = tmp_path / "no-token"
    result = run(f"{store_server.uri}?token_file={missing}", "scope", "create", "x")
    assert result.exit_code == 2 and str(missing) in one_line(result)


@pytest.fixture
def stream_with_events(store_server: StoreServer) -> StoreClient:
    client = StoreClient(store_server.uri, retry_timeout_s=2.0)
    StreamManager(client).create_scope("ops")
    StreamManager(client).create_stream("ops", "s", segment_count=2)
    yield client
    client.close()


def test_stream_tail_prints_events_and_watermarks_as_they_arrive(
    store_server: StoreServer, stream_with_events: StoreClient, clock: ManualClock
) -> None:
    client = stream_with_events
    client.append("ops/s/0", "w", 0, [b"before"], ["sensor-A"])

    def write_later() -> None:
        clock.advance(1_000)
        client.append("ops/s/1", "w", 0, [b"one", b"two"])

    timer = threading.Timer(0.5, write_later)
    timer.start()
    result = run(
        store_server.uri,
        "--json",
        "stream",
        "tail",
        "ops/s",
        "--max-events",
        "2",
        "--duration",
        "20",
    )
    timer.join()
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    events = [line for line in lines if line["kind"] == "event"]
    assert [e["payload"] for e in events] == ["one", "two"]  # from the tail: not "before"
    assert {e["ingestion_time"] for e in events} == {CLOCK_START_MS + 1_000}
    marks = [line for line in lines if line["kind"] == "watermark"]
    assert {m["segment"] for m in marks} == {"ops/s/0", "ops/s/1"}

    from_start = run(
        store_server.uri, "stream", "tail", "ops/s", "--from-start", "--duration", "0.5"
    )
    assert from_start.exit_code == 0
    assert "ops/s/0@0 key=sensor-A before" in from_start.output
    assert "ops/s/1@0 key=- one" in from_start.output
    assert "-- watermark ops/s/0 2023-11-14T22:13:20" in from_start.output


def test_readergroup_describe_and_reset(
    store_server: StoreServer, stream_with_events: StoreClient
) -> None:
    client = stream_with_events
    client.append("ops/s/0", "w", 0, [b"a"])
    ReaderGroupManager(client).create_reader_group("ops", "g", ["ops/s"])
    described = ok_json(store_server.uri, "readergroup", "describe", "ops/g")
    assert described["group"] == "ops/g" and described["streams"] == ["ops/s"]
    assert [s["segment"] for s in described["segments"]] == ["ops/s/0", "ops/s/1"]
    assert all(s["offset"] == 0 for s in described["segments"])
    human = run(store_server.uri, "readergroup", "describe", "ops/g")
    assert human.exit_code == 0 and "group watermark" in human.output

    reset = ok_json(store_server.uri, "readergroup", "reset", "ops/g", "--to", "latest")
    assert reset == {"group": "ops/g", "reset_to": "latest"}
    after = ok_json(store_server.uri, "readergroup", "describe", "ops/g")
    assert after["generation"] == described["generation"] + 1
    tail_offsets = {s["segment"]: s["offset"] for s in after["segments"]}
    assert tail_offsets["ops/s/0"] == client.segment_info("ops/s/0").write_offset > 0

    unknown = run(store_server.uri, "readergroup", "reset", "ops/g", "--to", "checkpoint:c1")
    assert unknown.exit_code == 3 and "'c1'" in one_line(unknown)
    bad_to = run(store_server.uri, "readergroup", "reset", "ops/g", "--to", "yesterday")
    assert bad_to.exit_code == 2 and "'yesterday'" in one_line(bad_to)
    missing = run(store_server.uri, "readergroup", "describe", "ops/none")
    assert missing.exit_code == 3 and "ops/none" in one_line(missing)


def test_watermarks_show_lag_idle_segments_and_what_holds_a_group_back(
    store_server: StoreServer, stream_with_events: StoreClient, clock: ManualClock
) -> None:
    client = stream_with_events
    ReaderGroupManager(client).create_reader_group("ops", "g", ["ops/s"])
    clock.advance(5_000)
    client.append("ops/s/0", "w", 0, [b"a"])  # segment 1 stays idle
    clock.advance(2_000)
    report = ok_json(store_server.uri, "watermarks", "ops/s", "--group", "g")
    now = CLOCK_START_MS + 7_000
    assert report["now"] == now
    by_name = {s["segment"]: s for s in report["segments"]}
    assert by_name["ops/s/0"]["delay_ms"] == now - by_name["ops/s/0"]["watermark"]
    assert by_name["ops/s/0"]["watermark"] == CLOCK_START_MS + 5_000 - 1
    assert by_name["ops/s/1"]["idle"] is True
    assert by_name["ops/s/1"]["delay_ms"] > by_name["ops/s/0"]["delay_ms"]
    (group,) = report["groups"]
    assert group["group"] == "ops/g"
    held = group["holding_back"]
    assert held in ("ops/s/0", "ops/s/1")  # both at their creation
    assert group["delay_ms"] == now - group["watermark"]
    assert group["reason"].endswith(f"no reader in the group: nobody reads {held}")
    assert group["unread_events"] == 1
    assert group["processing_time_watermark"] == CLOCK_START_MS - 1  # segment 1: nothing

    human = run(store_server.uri, "watermarks", "ops/s", "--group", "ops/g")
    assert human.exit_code == 0
    assert "idle" in human.output and "group ops/g: watermark" in human.output
    assert "held at" in human.output and "by ops/s/" in human.output
    assert "processing-time watermark" in human.output and "unread events" in human.output


def test_watermarks_and_stream_describe_show_the_writers_event_time_and_the_active_writers(
    store_server: StoreServer, stream_with_events: StoreClient, clock: ManualClock
) -> None:
    client = stream_with_events
    human = run(store_server.uri, "watermarks", "ops/s")
    assert "writers' event time of ops/s: no writer" in human.output
    client.assert_watermark("ops", "s", "sensor-a", 0, CLOCK_START_MS - 2_000)
    client.assert_watermark("ops", "s", "sensor-c", 0, CLOCK_START_MS - 9_000)
    clock.advance(1_000)
    client.append("ops/s/0", "sensor-a", 0, [b"a"])
    report = ok_json(store_server.uri, "watermarks", "ops/s")
    assert report["event_time_watermark"] == CLOCK_START_MS - 9_000
    for segment in report["segments"]:
        assert segment["event_time_watermark"] == CLOCK_START_MS - 9_000
        assert segment["event_time_delay_ms"] == 10_000 and segment["writers"] == 2
    human = run(store_server.uri, "watermarks", "ops/s")
    assert "EVENT TIME (WRITERS)" in human.output and "2023-11-14T22:13:11.000Z" in human.output

    described = ok_json(store_server.uri, "stream", "describe", "ops/s")
    writers = {w["writer_id"]: w for w in described["writers"]}
    assert writers["sensor-a"]["event_time"] == CLOCK_START_MS - 2_000
    assert writers["sensor-a"]["last_seen"] == CLOCK_START_MS + 1_000  # its append
    assert writers["sensor-c"]["event_time"] == CLOCK_START_MS - 9_000
    text = run(store_server.uri, "stream", "describe", "ops/s").output
    assert "LAST ASSERTION" in text and "sensor-c" in text and "2023-11-14T22:13:11.000Z" in text

    ReaderGroupManager(client).create_reader_group("ops", "g", ["ops/s"])
    (group,) = ok_json(store_server.uri, "watermarks", "ops/s", "--group", "g")["groups"]
    assert group["event_time_watermark"] is None  # not known until its readers read
    client.assert_watermark("ops", "s", "sensor-c", 1, None)  # c idles
    described = ok_json(store_server.uri, "stream", "describe", "ops/s")
    assert [w["writer_id"] for w in described["writers"]] == ["sensor-a"]
    assert ok_json(store_server.uri, "watermarks", "ops/s")["event_time_watermark"] == (
        CLOCK_START_MS - 2_000
    )


def test_watermarks_plot_draws_a_picture(spawn_server, tmp_path: pathlib.Path) -> None:
    server = spawn_server(
        tmp_path / "data", "--idle-tick-after-ms", "300", "--polling-period-ms", "100"
    )
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("ops")
        StreamManager(client).create_stream("ops", "s", segment_count=2)
        stop = threading.Event()

        def write() -> None:
            number = 0
            while not stop.wait(0.05):
                client.append("ops/s/0", "w", number, [b"x"])
                # The writer asserts an event time a second behind: the dotted lines.
                now = client.segment_info("ops/s/0").last_write_time
                client.assert_watermark("ops", "s", "w", number, now - 1_000)
                number += 1

        writer = threading.Thread(target=write)
        writer.start()
        picture = tmp_path / "watermarks.png"
        try:
            result = run(
                server.uri,
                "--json",
                "watermarks",
                "ops/s",
                "--plot",
                str(picture),
                "--duration",
                "2",
                "--interval",
                "0.1",
            )
        finally:
            stop.set()
            writer.join()
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["samples"] >= 10
    assert shown["last"]["event_time_watermark"] is not None
    from matplotlib import image

    pixels = image.imread(str(picture))
    assert pixels.shape[0] >= 400 and pixels.shape[1] >= 800
    colours = {tuple(round(float(c), 2) for c in p[:3]) for p in pixels.reshape(-1, 4)[::7]}
    assert len(colours) > 20, "the picture has lines of several colours, not a blank canvas"
