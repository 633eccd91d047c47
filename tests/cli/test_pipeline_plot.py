"""The pipeline's plot: each stage's input and output watermark over time, from plain reports."""

from __future__ import annotations

import datetime
import pathlib

import pytest

from connector.cli.pipeline import PipelineReport
from connector.cli.pipeline_plot import pipeline_picture, plot_pipeline
from connector.stages import StageLink, stage_times
from connector.stages.chain import FROM_GROUP, FROM_STREAMS
from tests.conftest import CLOCK_START_MS

T = CLOCK_START_MS
ONE = StageLink("one", "spark", ("p/raw",), "p/mid", "one-w", group="p/g")
TWO = StageLink("two", "flink", ("p/mid",), "p/out", "two", writer_is_prefix=True)


def at(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def report(now: int, one_in: int, one_out: int | None, two_out: int | None) -> PipelineReport:
    """Stage two reads one's output with no group: its input is one's output watermark."""
    one = stage_times(ONE, one_in, FROM_GROUP, [] if one_out is None else [("one-w", one_out)])
    two_asserted = [] if two_out is None else [("two-0", two_out)]
    two = stage_times(TWO, one_out, FROM_STREAMS, two_asserted)
    return PipelineReport("p", now, (one, two), (("one", "two"),))


def reports() -> list[PipelineReport]:
    # One second a sample: one's input runs ahead 2 s of its output; two asserts from the 2nd on.
    return [
        report(T + s * 1_000, T + s * 1_000, T + s * 1_000 - 2_000, None if s < 1 else T)
        for s in range(4)
    ]


def test_each_stage_has_its_input_and_output_line_over_the_store_clock() -> None:
    drawn = pipeline_picture(reports())
    lines = {line.label: line for line in drawn.lines}
    assert list(lines) == [
        "one input watermark",
        "one output watermark",
        "two input watermark",
        "two output watermark",
    ]
    times = tuple(at(T + s * 1_000) for s in range(4))
    assert lines["one input watermark"].times == times
    assert lines["one input watermark"].values == times
    assert lines["one output watermark"].values == tuple(
        at(t.timestamp() * 1000 - 2_000) for t in times
    )
    assert lines["two output watermark"].times == times[1:], "a sample with no assertion: a gap"
    assert drawn.y_label == "event time (UTC)"


def test_a_stage_is_one_colour_input_solid_output_dashed_and_coinciding_lines_both_show() -> None:
    drawn = pipeline_picture(reports())
    one_in, one_out, two_in, two_out = drawn.lines
    assert one_in.colour == one_out.colour != two_in.colour == two_out.colour
    assert (one_in.dashes, one_out.dashes, two_in.dashes) == ("solid", "dashed", "solid")
    assert two_in.values == one_out.values, "two's input is one's output..."
    assert two_in.width < one_out.width and two_in.z > one_out.z, "...and both show"


def test_the_band_between_a_stages_lines_is_its_latency_and_the_notes_name_it() -> None:
    drawn = pipeline_picture(reports())
    bands = {band.label: band for band in drawn.bands}
    assert list(bands) == ["one event-time latency", "two event-time latency"]
    one = bands["one event-time latency"]
    assert [(u - lo).total_seconds() for lo, u in zip(one.lower, one.upper, strict=True)] == [
        2.0
    ] * 4
    two = bands["two event-time latency"]
    assert two.times == tuple(at(T + s * 1_000) for s in range(1, 4))
    assert drawn.notes == (
        "stage one (spark): input from its group p/g, latency 2000ms",
        "stage two (flink): input from its inputs' writers, latency 1000ms",
        "(latency: input minus output watermark at 2023-11-14T22:13:23.000Z)",
    )


def test_a_stage_forgotten_meanwhile_keeps_its_lines_and_no_samples_is_an_error() -> None:
    earlier = reports()
    last = PipelineReport("p", T + 9_000, (earlier[-1].stages[1],), (("two",),))
    labels = [line.label for line in pipeline_picture([*earlier, last]).lines]
    assert labels[:2] == ["two input watermark", "two output watermark"]
    assert labels[2:] == ["one input watermark", "one output watermark"]
    with pytest.raises(ValueError, match="no samples"):
        pipeline_picture([])


@pytest.mark.parametrize(("name", "magic"), [("p.png", b"\x89PNG"), ("p.svg", b"<?xml")])
def test_the_picture_is_a_png_or_an_svg(tmp_path: pathlib.Path, name: str, magic: bytes) -> None:
    target = tmp_path / name
    plot_pipeline(reports(), str(target))
    assert target.read_bytes().startswith(magic)
