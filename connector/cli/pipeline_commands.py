"""``tidemarkctl pipeline``: a scope's chain of stages, each with its input and output watermark."""

from __future__ import annotations

from typing import Any

import click

from connector.cli.app import Settings, Shown, TidemarkctlCommand
from connector.cli.params import plot_options, plotting
from connector.cli.pipeline import PipelineReport, pipeline
from connector.client import StoreClient
from connector.clock import utc_text
from connector.stages import forget_stage
from connector.stages.chain import FROM_GROUP, StageTimes

__all__ = ["pipeline_command", "pipeline_text"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)


def _time(ms: int | None, unknown: str) -> str:
    return unknown if ms is None else utc_text(ms)


def _input_text(stage: StageTimes) -> str:
    mark = _time(stage.input_watermark, "none")
    if stage.input_from == FROM_GROUP:
        return f"{mark} (group {stage.link.group})"
    return f"{mark} (inputs' writers)"


def _latency_text(ms: int | None) -> str:
    return "-" if ms is None else f"{ms}ms"


def pipeline_text(report: PipelineReport) -> str:
    """The report for people: each chain as a line of streams and stages, then a table.

    The table gives each stage (upstream first) its input watermark and
    where it came from, its output watermark (``none`` while its writers
    assert nothing: not started, idle or stopped) and its event-time
    latency (input minus output).
    """
    if not report.stages:
        return f"pipeline {report.scope}: no stages recorded"
    by_name = {t.link.name: t.link for t in report.stages}
    lines = [f"pipeline {report.scope} at {utc_text(report.now)} (store clock)"]
    for chain in report.chains:
        first = by_name[chain[0]]
        words = [" + ".join(first.inputs) or "?"]
        for name in chain:
            words += [f"[{name}]", by_name[name].output]
        lines.append("  " + " -> ".join(words))
    rows = [
        (
            t.link.name,
            t.link.engine,
            _input_text(t),
            _time(t.output_watermark, "none"),
            _latency_text(t.latency_ms),
        )
        for t in report.stages
    ]
    header = ("STAGE", "ENGINE", "INPUT WATERMARK", "OUTPUT WATERMARK", "EVENT-TIME LATENCY")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines.append("")
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  " + "  ".join([*cells, row[4]]))
    return "\n".join(lines)


@click.command("pipeline", cls=TidemarkctlCommand)
@click.argument("scope_name", metavar="SCOPE")
@click.option(
    "--forget",
    "forget",
    multiple=True,
    metavar="STAGE",
    help="Removes this stage's record first (a job records it again when it next starts).",
)
@plot_options
@pass_settings
def pipeline_command(
    settings: Settings,
    scope_name: str,
    forget: tuple[str, ...],
    plot_file: str | None,
    duration: float,
    interval: float,
) -> Shown:
    """The chain of stages whose output streams are in SCOPE, with their watermarks.

    A stage is a job reading Tidemark streams and writing one with its
    watermark asserted (Spark's assertWatermark, the Flink sink's
    with_watermark_assertion), recorded when it starts. Per stage: its
    input watermark (its reader group's event time, or its inputs'
    writers' when the store keeps no position of it), its output watermark
    (what it asserts) and its event-time latency, the difference.
    --plot FILE.png samples for --duration and draws each stage's input and
    output watermark against the store's clock, its latency shaded between.
    """
    client = settings.client()
    forgotten = [name for name in forget if forget_stage(client, scope_name, name)]
    if plot_file is None:
        report = pipeline(client, scope_name)
        value, text = report.to_dict(), pipeline_text(report)
    else:
        value, text = _plotted(client, scope_name, plot_file, duration, interval)
    note = "".join(f"forgot stage {name}\n" for name in forgotten).rstrip("\n")
    if forget:
        value["forgotten"] = forgotten
    return Shown(value, text, note)


def _plotted(
    client: StoreClient, scope: str, path: str, duration: float, interval: float
) -> tuple[dict[str, Any], str]:
    """Samples the pipeline, draws it at ``path``; the answer and its text (the last sample).

    Shows how many samples it took on stderr as it goes. The answer names
    each line drawn and how many samples it has a value at.
    """
    drawing = plotting("connector.cli.pipeline_plot")
    expected = 1 + int(duration // interval)

    def progress(taken: int) -> None:
        click.echo(f"\rsampling pipeline {scope}: {taken} of {expected}", nl=False, err=True)

    reports = drawing.sample_pipeline(client, scope, duration, interval, progress)
    click.echo(err=True)
    drawn = drawing.plot_pipeline(reports, path)
    last = reports[-1]
    value = {
        "plot": path,
        "samples": len(reports),
        "lines": [{"label": line.label, "points": len(line.times)} for line in drawn.lines],
        "last": last.to_dict(),
    }
    return value, f"{pipeline_text(last)}\nplot of {len(reports)} samples: {path}"
