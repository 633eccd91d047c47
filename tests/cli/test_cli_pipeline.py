"""``tidemarkctl pipeline``: the drawing from plain values, and the command on a real server.

The command reads stage links and watermarks through the server, on both
storages; its plot samples a pipeline whose watermarks rise meanwhile.
"""

from __future__ import annotations

import json
import pathlib
import threading

import pytest

from connector import StoreClient, StreamManager
from connector.cli.pipeline import PipelineReport
from connector.cli.pipeline_commands import pipeline_text
from connector.clock import ManualClock
from connector.groups.state import GroupState, SegmentCursor
from connector.reader.group import ReaderGroupManager
from connector.server import StoreServer
from connector.stages import StageLink, record_stage, stage_times
from connector.stages.chain import FROM_GROUP, FROM_STREAMS
from tests.cli import run
from tests.conftest import CLOCK_START_MS

T = CLOCK_START_MS


def test_the_drawing_shows_the_chain_and_each_stages_watermarks_and_latency() -> None:
    one = StageLink("one", "spark", ("p/raw",), "p/mid", "one-w", group="p/g")
    two = StageLink("two", "flink", ("p/mid",), "p/out", "two", writer_is_prefix=True)
    report = PipelineReport(
        "p",
        T + 9_000,
        (
            stage_times(one, T + 5_000, FROM_GROUP, [("one-w", T + 3_000)]),
            stage_times(two, T + 3_000, FROM_STREAMS, []),
        ),
        (("one", "two"),),
    )
    lines = pipeline_text(report).splitlines()
    assert lines[0] == "pipeline p at 2023-11-14T22:13:29.000Z (store clock)"
    assert lines[1] == "  p/raw -> [one] -> p/mid -> [two] -> p/out"
    assert lines[3].split() == ["STAGE", "ENGINE", "INPUT", "WATERMARK", "OUTPUT", "WATERMARK",
                                "EVENT-TIME", "LATENCY"]  # fmt: skip
    assert lines[4].split() == [
        "one", "spark", "2023-11-14T22:13:25.000Z", "(group", "p/g)",
        "2023-11-14T22:13:23.000Z", "2000ms",
    ]  # fmt: skip
    assert lines[5].split() == [
        "two", "flink", "2023-11-14T22:13:23.000Z", "(inputs'", "writers)", "none", "-",
    ]  # fmt: skip
    assert pipeline_text(PipelineReport("p", T, (), ())) == "pipeline p: no stages recorded"


@pytest.mark.storages("file", "jetstream")
def test_pipeline_reads_each_stage_from_its_group_or_its_inputs_and_its_writers(
    store_server: StoreServer,
) -> None:
    uri = store_server.uri
    with StoreClient(uri, retry_timeout_s=2.0) as client:
        manager = StreamManager(client)
        manager.create_scope("p")
        for name in ("raw", "mid", "out"):
            manager.create_stream("p", name, segment_count=1)
        one = StageLink("one", "spark", ("p/raw",), "p/mid", "one-w", group="p/g")
        two = StageLink("two", "flink", ("p/mid",), "p/out", "two", writer_is_prefix=True)
        assert record_stage(client, two) and record_stage(client, one)
        assert not record_stage(client, one), "the same link again writes nothing"
        # Stage one's query published its position: the writers' event time there is T+5 s.
        cursor = SegmentCursor(0, T - 1, event_time=T + 5_000)
        ReaderGroupManager(client).publish_position(
            "p", "g", ["p/raw"], GroupState(cursors={"p/raw/0": cursor})
        )
        client.assert_watermark("p", "raw", "sensor", 1, T + 8_000)  # not one's input: its group
        client.assert_watermark("p", "mid", "one-w", 1, T + 3_000)
        client.assert_watermark("p", "out", "two-0", 1, T + 1_000)
        client.assert_watermark("p", "out", "two-1", 1, T + 2_500)

    result = run(uri, "pipeline", "p", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["chains"] == [["one", "two"]]
    got = {
        s["stage"]: (s["input_watermark"], s["input_from"], s["output_watermark"])
        for s in report["stages"]
    }
    assert got == {
        "one": (T + 5_000, "group", T + 3_000),
        "two": (T + 3_000, "streams", T + 1_000),  # its input: one's output, its least subtask
    }
    assert [s["event_time_latency_ms"] for s in report["stages"]] == [2_000, 2_000]

    text = run(uri, "pipeline", "p")
    assert "p/raw -> [one] -> p/mid -> [two] -> p/out" in text.stdout

    forgotten = run(uri, "pipeline", "p", "--forget", "two", "--json")
    assert json.loads(forgotten.stdout)["forgotten"] == ["two"]
    assert [s["stage"] for s in json.loads(forgotten.stdout)["stages"]] == ["one"]
    missing = run(uri, "pipeline", "nowhere")
    assert missing.exit_code == 3 and "'nowhere'" in missing.stderr


def test_the_plot_samples_each_stages_watermarks_as_they_rise(
    store_server: StoreServer, clock: ManualClock, tmp_path: pathlib.Path
) -> None:
    uri = store_server.uri
    stop = threading.Event()
    with StoreClient(uri, retry_timeout_s=2.0) as client:
        manager = StreamManager(client)
        manager.create_scope("p")
        for name in ("raw", "mid", "out"):
            manager.create_stream("p", name, segment_count=1)
        record_stage(client, StageLink("one", "spark", ("p/raw",), "p/mid", "one-w"))
        record_stage(client, StageLink("two", "flink", ("p/mid",), "p/out", "two", True))

        def rise(number: int) -> None:
            now = clock.now_ms()
            client.assert_watermark("p", "raw", "sensor", number, now - 1_000)
            client.assert_watermark("p", "mid", "one-w", number, now - 3_000)
            client.assert_watermark("p", "out", "two-0", number, now - 3_500)

        def keep_rising() -> None:
            for number in range(2, 500):  # bounded: the sampling lasts about a second
                if stop.wait(0.02):
                    return
                clock.advance(100)
                rise(number)

        rise(1)
        riser = threading.Thread(target=keep_rising)
        riser.start()
        picture = tmp_path / "pipeline.svg"
        try:
            result = run(
                uri, "--json", "pipeline", "p", "--plot", str(picture),
                "--duration", "1", "--interval", "0.2",
            )  # fmt: skip
        finally:
            stop.set()
            riser.join()
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["samples"] >= 4
    assert "sampling pipeline p: " in result.stderr, "it shows its progress"
    labels = [f"{s} {w} watermark" for s in ("one", "two") for w in ("input", "output")]
    assert shown["lines"] == [{"label": label, "points": shown["samples"]} for label in labels]
    # Its exact latency depends on which rises a sample's reads fell between: known, not exact.
    assert all(s["event_time_latency_ms"] is not None for s in shown["last"]["stages"])
    drawn = picture.read_text()
    assert drawn.startswith("<?xml")
    for label in [*labels, "one event-time latency", "two event-time latency"]:
        assert f"<!-- {label} -->" in drawn
