"""``tidemarkctl watermarks``: how far time has progressed on a stream and in reader groups."""

from __future__ import annotations

from typing import Any

import click

from connector.cli.app import Settings, Shown, TidemarkctlCommand
from connector.cli.params import SCOPED_NAME, STREAM_NAME, plot_options, plotting
from connector.cli.watermarks import (
    GroupWatermark,
    WatermarkReport,
    group_view,
    server_now,
    watermarks,
)
from connector.clock import utc_text
from connector.groups.progress import DEFAULT_LARGE_DELAY_MS, GroupProgress
from connector.groups.stall import StoreTiming
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


def delay_text(ms: int | None) -> str:
    """A delay for people: ``1234ms``, or ``-`` when not known."""
    return "-" if ms is None else f"{ms}ms"


def progress_text(progress: GroupProgress) -> str:
    """A group's two watermarks, their delays, its unread events and the diagnosis, in two lines."""
    p = progress
    event = "not known yet" if p.event_time_watermark is None else p.event_time_watermark
    event_text = event if isinstance(event, str) else watermark_text(event)
    return (
        f"  processing-time watermark {watermark_text(p.processing_time_watermark)} "
        f"(delay {delay_text(p.processing_time_delay_ms)}), event-time watermark {event_text} "
        f"(delay {delay_text(p.event_time_delay_ms)}), {p.unread_events} unread events\n"
        f"  {p.diagnosis.text}"
    )


def _group_text(g: GroupWatermark) -> str:
    return (
        f"group {g.group}: watermark {watermark_text(g.watermark)} (delay {g.delay_ms}ms), "
        f"{g.reason}\n{progress_text(g.progress)}"
    )


def _report_text(report: WatermarkReport) -> str:
    lines = [
        f"stream {report.stream} at {utc_text(report.now)} (store clock)",
        f"  {'SEGMENT':<24} {'WATERMARK':<24} {'DELAY':>10}  {'STATE':<7}"
        f"{'EVENT TIME (WRITERS)':<24} {'DELAY':>10}  WRITERS",
    ]
    for s in report.segments:
        state = "sealed" if s.sealed else ("idle" if s.idle else "active")
        event_delay = "" if s.event_time_delay_ms is None else f"{s.event_time_delay_ms}ms"
        lines.append(
            f"  {s.segment:<24} {watermark_text(s.watermark):<24} {s.delay_ms:>8}ms  {state:<7}"
            f"{event_time_text(s.event_time_watermark):<24} {event_delay:>10}  {s.writers}"
        )
    lines.append(
        f"writers' event time of {report.stream}: {event_time_text(report.event_time_watermark)}"
    )
    lines += [_group_text(g) for g in report.groups]
    return "\n".join(lines)


def _ms_option(flag: str, default: int | None, note: str) -> Any:
    """An option for --why: one of the server's timings, which the CLI cannot ask it for."""
    return click.option(
        flag,
        type=click.IntRange(min=0),
        default=default,
        show_default=True,
        help=f"With --why: {note}.",
    )


@click.command("watermarks", cls=TidemarkctlCommand)
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM", required=False)
@click.option(
    "--group", "groups", multiple=True, metavar="[SCOPE/]GROUP", help="Also show this reader group."
)
@click.option(
    "--why",
    "why_group",
    type=SCOPED_NAME,
    metavar="SCOPE/GROUP",
    help="Name what holds this group's watermarks now, and what will move them.",
)
@_ms_option("--idle-tick-after-ms", StoreTiming.idle_tick_after_ms, "the server's flag")
@_ms_option(
    "--polling-period-ms", StoreTiming.polling_period_ms, "the server's flag; 0: idle ticks are off"
)
@_ms_option("--writer-idle-timeout-ms", StoreTiming.writer_idle_timeout_ms, "the server's flag")
@click.option(
    "--large-delay-ms",
    type=click.IntRange(min=0),
    default=DEFAULT_LARGE_DELAY_MS,
    show_default=True,
    help="A watermark's delay above this is large (for the diagnosis).",
)
@click.option(
    "--idle-after-ms",
    type=click.IntRange(min=0),
    default=1_000,
    show_default=True,
    help="A segment with no write or idle tick for this long is shown idle.",
)
@plot_options
@pass_settings
def watermarks_command(
    settings: Settings,
    name: StreamId | None,
    groups: tuple[str, ...],
    why_group: tuple[str, str] | None,
    idle_tick_after_ms: int,
    polling_period_ms: int,
    writer_idle_timeout_ms: int,
    large_delay_ms: int,
    idle_after_ms: int,
    plot_file: str | None,
    duration: float,
    interval: float,
) -> Shown:
    """How far time has progressed on SCOPE/STREAM, or --why a group's watermark stands still.

    Per segment: the watermark, its delay behind the store's clock, idle or
    not, and the event-time watermark its writers asserted (with its delay
    and how many writers hold it); per --group: its watermark, its
    processing-time and event-time watermarks with their delays, its unread
    events, what they say (healthy, old data, blocked) and what holds it.
    --why SCOPE/GROUP: the segment (and in the event time the writer) at
    the group's minimum, since when, how far behind the next, and what will
    move it. --plot FILE.png samples for --duration and draws the ingestion
    clock against each watermark, the writers' event time dotted.
    """
    timing = StoreTiming(idle_tick_after_ms, polling_period_ms or None, writer_idle_timeout_ms)
    if why_group is not None:
        scope, group = why_group
        client = settings.client()
        view = group_view(
            client, scope, group, server_now(client, scope), timing=timing,
            large_after_ms=large_delay_ms,
        )  # fmt: skip
        value = {**view.stall.to_dict(), **view.progress.to_dict()}
        return Shown(value, f"{view.stall.text}\n{progress_text(view.progress)}")
    if name is None:
        msg = "give SCOPE/STREAM, or --why SCOPE/GROUP"
        raise click.UsageError(msg)
    if plot_file is None:
        report = watermarks(settings.client(), name, groups, idle_after_ms, timing, large_delay_ms)
        return Shown(report.to_dict(), _report_text(report))
    drawing = plotting("connector.cli.plot")
    reports = drawing.sample(settings.client(), name, groups, duration, interval, idle_after_ms)
    drawing.plot(reports, plot_file)
    last = reports[-1]
    return Shown(
        {"plot": plot_file, "samples": len(reports), "last": last.to_dict()},
        f"{_report_text(last)}\nplot of {len(reports)} samples: {plot_file}",
    )
