"""``tidemarkctl watermarks``: how far time has progressed on a stream and in reader groups."""

from __future__ import annotations

import click

from connector.cli.app import Failure, Settings, Shown, TidemarkctlCommand
from connector.cli.params import STREAM_NAME
from connector.cli.watermarks import WatermarkReport, watermarks
from connector.clock import utc_text
from connector.names import StreamId
from connector.timestamps import END_OF_TIME

__all__ = ["watermark_text", "watermarks_command"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)


def watermark_text(ms: int) -> str:
    """A watermark for people: a UTC time, ``end of time``, or ``none``."""
    if ms >= END_OF_TIME:
        return "end of time"
    if ms < 0:
        return "none"
    return utc_text(ms)


def event_time_text(ms: int | None) -> str:
    """The writers' event-time watermark for people: a UTC time, or ``no writer``."""
    return "no writer" if ms is None else watermark_text(ms)


def _report_text(report: WatermarkReport) -> str:
    lines = [
        f"stream {report.stream} at {utc_text(report.now)} (store clock)",
        f"  {'SEGMENT':<24} {'WATERMARK':<24} {'LAG':>10}  {'STATE':<7}"
        f"{'EVENT TIME (WRITERS)':<24} {'LAG':>10}  WRITERS",
    ]
    for s in report.segments:
        state = "sealed" if s.sealed else ("idle" if s.idle else "active")
        event_lag = "" if s.event_time_lag_ms is None else f"{s.event_time_lag_ms}ms"
        lines.append(
            f"  {s.segment:<24} {watermark_text(s.watermark):<24} {s.lag_ms:>8}ms  {state:<7}"
            f"{event_time_text(s.event_time_watermark):<24} {event_lag:>10}  {s.writers}"
        )
    lines.append(
        f"writers' event time of {report.stream}: {event_time_text(report.event_time_watermark)}"
    )
    for g in report.groups:
        holding = f"held back by {g.holding_back}: {g.reason}" if g.holding_back else g.reason
        mark = watermark_text(g.watermark)
        lines.append(
            f"group {g.group}: watermark {mark}, lag {g.lag_ms}ms, {holding}; "
            f"writers' event time {event_time_text(g.event_time_watermark)}"
        )
    return "\n".join(lines)


@click.command("watermarks", cls=TidemarkctlCommand)
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@click.option(
    "--group", "groups", multiple=True, metavar="[SCOPE/]GROUP", help="Also show this reader group."
)
@click.option(
    "--idle-after-ms",
    type=click.IntRange(min=0),
    default=1_000,
    show_default=True,
    help="A segment with no write or idle tick for this long is shown idle.",
)
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), help="Draw a PNG here.")
@click.option(
    "--duration",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="With --plot: seconds to sample for.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    help="With --plot: seconds between samples.",
)
@pass_settings
def watermarks_command(
    settings: Settings,
    name: StreamId,
    groups: tuple[str, ...],
    idle_after_ms: int,
    plot_file: str | None,
    duration: float,
    interval: float,
) -> Shown:
    """How far time has progressed on SCOPE/STREAM.

    Per segment: the watermark, its lag behind now, idle or not, and the
    event-time watermark its writers asserted (with its lag and how many
    writers hold it); per --group: the group watermark and the segment
    holding it back. --plot FILE.png samples for --duration and draws the
    ingestion clock against each watermark, the writers' event time dotted.
    """
    if plot_file is None:
        report = watermarks(settings.client(), name, groups, idle_after_ms)
        return Shown(report.to_dict(), _report_text(report))
    try:
        from connector.cli.plot import plot, sample
    except ImportError as error:
        msg = f"--plot needs matplotlib (pip install '.[plot]' in a checkout): {error}"
        raise Failure(msg, 1, "ImportError") from None
    reports = sample(settings.client(), name, groups, duration, interval, idle_after_ms)
    plot(reports, plot_file)
    last = reports[-1]
    return Shown(
        {"plot": plot_file, "samples": len(reports), "last": last.to_dict()},
        f"{_report_text(last)}\nplot of {len(reports)} samples: {plot_file}",
    )
