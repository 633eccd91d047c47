"""A picture of time on a stream: the ingestion clock against each segment's watermark.

Needs matplotlib (the ``plot`` extra). An idle segment shows as a staircase
below the clock (it rises only at idle ticks); a stalled reader group as a
flat line falling ever further behind.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402

from connector.cli.watermarks import WatermarkReport, watermarks  # noqa: E402
from connector.client import StoreClient  # noqa: E402
from connector.names import StreamId  # noqa: E402

__all__ = ["plot", "sample"]

_NO_WATERMARK = 2**62


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


def plot(reports: Sequence[WatermarkReport], path: str) -> None:
    """Draws the reports into a PNG at ``path``: x the store's clock, y each watermark.

    Both axes are seconds since the first sample; the clock itself is the
    diagonal, and how far a line is below it is that watermark's lag.
    """
    if not reports:
        msg = "no samples to plot"
        raise ValueError(msg)
    origin = reports[0].now
    xs = [(r.now - origin) / 1000 for r in reports]
    figure, axes = plt.subplots(figsize=(9, 5), dpi=100)
    axes.plot(xs, xs, color="black", linewidth=2, label="ingestion clock")
    # Sealed segments' watermarks are frozen: they would only stretch the picture.
    segments = sorted({s.segment for r in reports for s in r.segments if not s.sealed})
    for name in segments:
        points = [
            ((r.now - origin) / 1000, (s.watermark - origin) / 1000)
            for r in reports
            for s in r.segments
            if s.segment == name and 0 <= s.watermark < _NO_WATERMARK
        ]
        if points:
            axes.step(*zip(*points, strict=True), where="post", label=name)
    group_names = sorted({g.group for r in reports for g in r.groups})
    for name in group_names:
        points = [
            ((r.now - origin) / 1000, (g.watermark - origin) / 1000)
            for r in reports
            for g in r.groups
            if g.group == name and 0 <= g.watermark < _NO_WATERMARK
        ]
        if points:
            axes.step(
                *zip(*points, strict=True),
                where="post",
                linestyle="--",
                linewidth=2,
                label=f"group {name}",
            )
    axes.set_title(f"{reports[0].stream}: watermarks against the ingestion clock")
    axes.set_xlabel("store clock, seconds since the first sample")
    axes.set_ylabel("watermark, seconds since the first sample")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)
