"""A picture of time on a stream: the ingestion clock against each segment's watermark.

Needs matplotlib (the ``plot`` extra). Both axes are wall-clock times (UTC):
x the store's clock when sampled, y the watermark. An idle segment shows as
a staircase below the clock (it rises only at idle ticks); a stalled reader
group as a flat line falling ever further behind, and a note under the
picture says why each group is held back (no readers, which segment, which
reader). Lines that coincide stay visible: each is drawn narrower and on top
of the one before, with its own dash pattern. The event time each segment's
writers asserted is a line of its own (``event time ...``): a slow writer
shows as a line lagging below, which jumps up once the writer marks itself
idle or times out.

:func:`picture` decides what is drawn (a plain value); :func:`plot` draws it.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from connector.cli.watermarks import WatermarkReport, watermarks  # noqa: E402
from connector.client import StoreClient  # noqa: E402
from connector.names import StreamId  # noqa: E402
from connector.timestamps import END_OF_TIME  # noqa: E402

__all__ = ["Line", "Picture", "picture", "plot", "sample"]

_DASHES = ("solid", "dashed", "dashdot", "dotted")
_WIDEST = 7.0
_NARROWEST = 1.2


@dataclass(frozen=True)
class Line:
    """One line of the picture: points (store clock, watermark) and how it is drawn.

    ``width`` and ``z``: a later line is narrower and drawn above, so lines
    that coincide show as stripes, none hidden. ``steps``: a watermark holds
    from one sample to the next; the clock runs straight.
    """

    label: str
    times: tuple[datetime.datetime, ...]
    values: tuple[datetime.datetime, ...]
    width: float
    dashes: str
    z: int
    colour: str | None = None
    steps: bool = True


@dataclass(frozen=True)
class Picture:
    """What :func:`plot` draws: a title, the lines, and notes under them."""

    title: str
    lines: tuple[Line, ...]
    notes: tuple[str, ...]


def sample(
    client: StoreClient,
    stream: StreamId,
    groups: Sequence[str],
    duration_s: float,
    interval_s: float,
    idle_after_ms: int = 1_000,
) -> list[WatermarkReport]:
    """Reports taken every ``interval_s`` seconds for ``duration_s`` seconds (at least one)."""
    reports = [watermarks(client, stream, groups, idle_after_ms)]
    deadline = time.monotonic() + duration_s
    while time.monotonic() + interval_s <= deadline:
        time.sleep(interval_s)
        reports.append(watermarks(client, stream, groups, idle_after_ms))
    return reports


def _moment(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def picture(reports: Sequence[WatermarkReport]) -> Picture:
    """What to draw for ``reports``: the clock, each open segment's and each group's watermark.

    Raises:
        ValueError: there are no reports.
    """
    if not reports:
        msg = "no samples to plot"
        raise ValueError(msg)
    series: list[tuple[str, list[tuple[int, int]]]] = []
    # Sealed segments' watermarks are frozen: they would only stretch the picture.
    for name in sorted({s.segment for r in reports for s in r.segments if not s.sealed}):
        points = [
            (r.now, s.watermark)
            for r in reports
            for s in r.segments
            if s.segment == name and 0 <= s.watermark < END_OF_TIME
        ]
        series.append((f"segment {name}", points))
        asserted = [
            (r.now, s.event_time_watermark)
            for r in reports
            for s in r.segments
            if s.segment == name and s.event_time_watermark is not None
        ]
        series.append((f"event time {name} (writers)", asserted))
    for name in sorted({g.group for r in reports for g in r.groups}):
        points = [
            (r.now, g.watermark)
            for r in reports
            for g in r.groups
            if g.group == name and 0 <= g.watermark < END_OF_TIME
        ]
        series.append((f"group {name}", points))
    series = [(label, points) for label, points in series if points]
    step = (_WIDEST - _NARROWEST) / max(1, len(series))
    lines = [
        Line(
            "ingestion clock",
            tuple(_moment(r.now) for r in reports),
            tuple(_moment(r.now) for r in reports),
            _WIDEST + 3,
            "solid",
            1,
            colour="0.85",
            steps=False,
        )
    ]
    for index, (label, points) in enumerate(series):
        lines.append(
            Line(
                label,
                tuple(_moment(t) for t, _ in points),
                tuple(_moment(w) for _, w in points),
                round(_WIDEST - index * step, 2),
                _DASHES[index % len(_DASHES)],
                2 + index,
            )
        )
    last = reports[-1]
    notes = tuple(f"group {g.group}: {g.reason}" for g in last.groups)
    title = f"{last.stream}: watermarks against the store's clock (UTC)"
    return Picture(title, tuple(lines), notes)


def plot(reports: Sequence[WatermarkReport], path: str) -> Picture:
    """Draws :func:`picture` of ``reports`` into a PNG at ``path``; returns what it drew."""
    drawn = picture(reports)
    height = 5 + 0.3 * len(drawn.notes)
    figure, axes = plt.subplots(figsize=(10, height), dpi=100)
    for line in drawn.lines:
        axes.plot(
            line.times,
            line.values,
            drawstyle="steps-post" if line.steps else "default",
            label=line.label,
            linewidth=line.width,
            linestyle=line.dashes,
            zorder=line.z,
            color=line.colour,
            solid_capstyle="butt",
        )
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=datetime.UTC))
    axes.set_title(drawn.title)
    axes.set_xlabel("store clock (UTC)")
    axes.set_ylabel("watermark (UTC)")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", fontsize="small")
    if drawn.notes:
        figure.text(0.01, 0.01, "\n".join(drawn.notes), fontsize="small", va="bottom")
        figure.subplots_adjust(bottom=0.12 + 0.04 * len(drawn.notes))
    figure.savefig(path, format="png")
    plt.close(figure)
    return drawn
