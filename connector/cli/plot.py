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
The sampling (:func:`samples`), the stacking of lines (:func:`stacked`) and
the drawing of a :class:`Picture` (:func:`draw`) serve other pictures too
(``tidemarkctl pipeline --plot``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from connector.cli.watermarks import WatermarkReport, watermarks  # noqa: E402
from connector.client import StoreClient  # noqa: E402
from connector.names import StreamId  # noqa: E402
from connector.timestamps import END_OF_TIME  # noqa: E402

__all__ = [
    "Band",
    "Line",
    "Picture",
    "draw",
    "moment",
    "picture",
    "plot",
    "sample",
    "samples",
    "stacked",
]

_DASHES = ("solid", "dashed", "dashdot", "dotted")
_WIDEST = 7.0
_NARROWEST = 1.2

Sample = TypeVar("Sample")


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
class Band:
    """A shaded area between two lines sampled at the same times (a stage's latency)."""

    label: str
    times: tuple[datetime.datetime, ...]
    lower: tuple[datetime.datetime, ...]
    upper: tuple[datetime.datetime, ...]
    colour: str | None = None


@dataclass(frozen=True)
class Picture:
    """What :func:`draw` draws: a title, the lines, notes under them, shaded bands, the y axis."""

    title: str
    lines: tuple[Line, ...]
    notes: tuple[str, ...]
    bands: tuple[Band, ...] = ()
    y_label: str = "watermark (UTC)"


def sample(
    client: StoreClient,
    stream: StreamId,
    groups: Sequence[str],
    duration_s: float,
    interval_s: float,
    idle_after_ms: int = 1_000,
) -> list[WatermarkReport]:
    """Reports taken every ``interval_s`` seconds for ``duration_s`` seconds (at least one)."""
    return samples(
        lambda: watermarks(client, stream, groups, idle_after_ms), duration_s, interval_s
    )


def samples(
    take: Callable[[], Sample],
    duration_s: float,
    interval_s: float,
    on_sample: Callable[[int], None] | None = None,
) -> list[Sample]:
    """``take()`` every ``interval_s`` seconds for ``duration_s`` seconds (at least once).

    ``on_sample(n)`` is told after the n-th sample (to show progress).
    """
    taken = [take()]
    if on_sample is not None:
        on_sample(1)
    deadline = time.monotonic() + duration_s
    while time.monotonic() + interval_s <= deadline:
        time.sleep(interval_s)
        taken.append(take())
        if on_sample is not None:
            on_sample(len(taken))
    return taken


def moment(ms: int) -> datetime.datetime:
    """Epoch milliseconds as a UTC time, as the axes show them."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def stacked(
    series: Sequence[tuple[str, Sequence[tuple[int, int]]]],
    styles: Sequence[tuple[str, str | None]] | None = None,
    first_z: int = 2,
) -> list[Line]:
    """Lines for ``(label, [(time ms, value ms), ...])`` series, each visible where they coincide.

    Each line is narrower than the one before and drawn above it.
    ``styles``: each series' ``(dashes, colour)``; by default the dashes
    take turns and matplotlib picks the colours.
    """
    step = (_WIDEST - _NARROWEST) / max(1, len(series))
    return [
        Line(
            label,
            tuple(moment(t) for t, _ in points),
            tuple(moment(w) for _, w in points),
            round(_WIDEST - index * step, 2),
            styles[index][0] if styles else _DASHES[index % len(_DASHES)],
            first_z + index,
            colour=styles[index][1] if styles else None,
        )
        for index, (label, points) in enumerate(series)
    ]


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
    clock = Line(
        "ingestion clock",
        tuple(moment(r.now) for r in reports),
        tuple(moment(r.now) for r in reports),
        _WIDEST + 3,
        "solid",
        1,
        colour="0.85",
        steps=False,
    )
    lines = [clock, *stacked(series)]
    last = reports[-1]
    notes = tuple(f"group {g.group}: {g.reason}" for g in last.groups)
    title = f"{last.stream}: watermarks against the store's clock (UTC)"
    return Picture(title, tuple(lines), notes)


def plot(reports: Sequence[WatermarkReport], path: str) -> Picture:
    """Draws :func:`picture` of ``reports`` into a PNG at ``path``; returns what it drew."""
    return draw(picture(reports), path)


def draw(drawn: Picture, path: str) -> Picture:
    """Draws ``drawn`` at ``path``: an SVG if the name ends in ``.svg``, else a PNG; returns it."""
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
    for band in drawn.bands:
        axes.fill_between(
            band.times,
            band.lower,
            band.upper,
            step="post",
            alpha=0.15,
            color=band.colour,
            label=band.label,
            zorder=0,
        )
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=datetime.UTC))
    axes.set_title(drawn.title)
    axes.set_xlabel("store clock (UTC)")
    axes.set_ylabel(drawn.y_label)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", fontsize="small")
    if drawn.notes:
        figure.text(0.01, 0.01, "\n".join(drawn.notes), fontsize="small", va="bottom")
        figure.subplots_adjust(bottom=0.12 + 0.04 * len(drawn.notes))
    figure.savefig(path, format="svg" if path.lower().endswith(".svg") else "png")
    plt.close(figure)
    return drawn
