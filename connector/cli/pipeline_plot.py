"""A picture of a pipeline over time: each stage's input and output watermark (seed 001).

As the seed's figures of watermark propagation draw them: x the store's
clock when sampled (processing time), y event time. Each stage has a
colour; its input watermark is a solid line, its output watermark a dashed
one, and the band between them, shaded, is its event-time latency. A stage
that reads another's output stream with no group position in the store has
that stage's output watermark as its input: the two lines coincide, each
visible (:func:`connector.cli.plot.stacked`). A watermark not known at a
sample (no writer asserts it) leaves a gap in its line.

The history is sampled by the command (:func:`sample_pipeline`), not kept
by the store: the store keeps only each stage's link, which a Flink job
records once as it starts, and both watermarks are read from the store at
any time anyway.

Needs matplotlib (the ``plot`` extra). :func:`pipeline_picture` decides
what is drawn (a plain value); :func:`plot_pipeline` draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from connector.cli.pipeline import PipelineReport, pipeline
from connector.cli.plot import Band, Picture, draw, moment, samples, stacked
from connector.client import StoreClient
from connector.clock import utc_text
from connector.stages.chain import FROM_GROUP, StageTimes

__all__ = ["pipeline_picture", "plot_pipeline", "sample_pipeline"]


def sample_pipeline(
    client: StoreClient,
    scope: str,
    duration_s: float,
    interval_s: float,
    on_sample: Callable[[int], None] | None = None,
) -> list[PipelineReport]:
    """The pipeline of ``scope`` every ``interval_s`` seconds for ``duration_s`` seconds.

    At least one report; ``on_sample(n)`` is told after the n-th.
    """
    return samples(lambda: pipeline(client, scope), duration_s, interval_s, on_sample)


def _stage_names(reports: Sequence[PipelineReport]) -> list[str]:
    """The stages upstream first as the last report has them, then any forgotten since, by name."""
    last = [t.link.name for t in reports[-1].stages]
    earlier = {t.link.name for r in reports for t in r.stages} - set(last)
    return last + sorted(earlier)


def _series(
    reports: Sequence[PipelineReport], name: str
) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int, int]]]:
    """The stage's (now, input), (now, output) and (now, output, input) where each is known."""
    inputs, outputs, both = [], [], []
    for report in reports:
        for times in report.stages:
            if times.link.name != name:
                continue
            given, out = times.input_watermark, times.output_watermark
            if given is not None:
                inputs.append((report.now, given))
            if out is not None:
                outputs.append((report.now, out))
            if given is not None and out is not None:
                both.append((report.now, out, given))
    return inputs, outputs, both


def _note(times: StageTimes) -> str:
    source = (
        f"its group {times.link.group}" if times.input_from == FROM_GROUP else "its inputs' writers"
    )
    latency = "unknown" if times.latency_ms is None else f"{times.latency_ms}ms"
    return f"stage {times.link.name} ({times.link.engine}): input from {source}, latency {latency}"


def pipeline_picture(reports: Sequence[PipelineReport]) -> Picture:
    """What to draw for ``reports`` (oldest first): each stage's watermarks and latency band.

    Lines come upstream first, each stage's input then its output; a line
    with no known point is left out. The notes give each stage's event-time
    latency at the last sample and where its input watermark came from.

    Raises:
        ValueError: there are no reports.
    """
    if not reports:
        msg = "no samples to plot"
        raise ValueError(msg)
    series: list[tuple[str, list[tuple[int, int]]]] = []
    styles: list[tuple[str, str | None]] = []
    bands = []
    for index, name in enumerate(_stage_names(reports)):
        colour = f"C{index % 10}"
        inputs, outputs, both = _series(reports, name)
        for label, points, dashes in (
            (f"{name} input watermark", inputs, "solid"),
            (f"{name} output watermark", outputs, "dashed"),
        ):
            if points:
                series.append((label, points))
                styles.append((dashes, colour))
        if both:
            bands.append(
                Band(
                    f"{name} event-time latency",
                    tuple(moment(t) for t, _, _ in both),
                    tuple(moment(out) for _, out, _ in both),
                    tuple(moment(given) for _, _, given in both),
                    colour,
                )
            )
    last = reports[-1]
    notes = tuple(_note(t) for t in last.stages)
    if notes:
        notes = (*notes, f"(latency: input minus output watermark at {utc_text(last.now)})")
    title = f"pipeline {last.scope}: each stage's input and output watermark"
    return Picture(
        title, tuple(stacked(series, styles)), notes, tuple(bands), y_label="event time (UTC)"
    )


def plot_pipeline(reports: Sequence[PipelineReport], path: str) -> Picture:
    """Draws :func:`pipeline_picture` of ``reports`` at ``path`` (SVG for ``.svg``, else PNG)."""
    return draw(pipeline_picture(reports), path)
