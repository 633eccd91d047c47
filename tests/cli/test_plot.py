"""The watermark plot: wall-clock axes, every line visible, and why a group is held back."""

from __future__ import annotations

import datetime
import pathlib

from connector.cli.plot import picture, plot
from connector.cli.watermarks import GroupWatermark, SegmentWatermark, WatermarkReport
from connector.groups.progress import Diagnosis, GroupProgress
from tests.conftest import CLOCK_START_MS


def report(now: int, marks: dict[str, int], group_mark: int) -> WatermarkReport:
    segments = tuple(
        SegmentWatermark(name, mark, now - mark, False, False, mark + 1, 0)
        for name, mark in marks.items()
    )
    progress = GroupProgress(
        now, 0, group_mark, now - group_mark, group_mark, now - group_mark, Diagnosis.HEALTHY
    )
    reason = "held by ops/s/1: no reader in the group: nobody reads ops/s/1"
    group = GroupWatermark("ops/g", group_mark, now - group_mark, "ops/s/1", None, reason, progress)
    return WatermarkReport("ops/s", now, segments, (group,))


def reports() -> list[WatermarkReport]:
    # Two segments whose watermarks coincide all along, and a group stuck at the start.
    return [
        report(
            CLOCK_START_MS + t,
            {"ops/s/0": CLOCK_START_MS + t - 5, "ops/s/1": CLOCK_START_MS + t - 5},
            CLOCK_START_MS,
        )
        for t in range(0, 5_000, 500)
    ]


def test_lines_that_coincide_are_each_drawn_narrower_and_above_the_one_before() -> None:
    drawn = picture(reports())
    labels = [line.label for line in drawn.lines]
    assert labels == ["ingestion clock", "segment ops/s/0", "segment ops/s/1", "group ops/g"]
    zero, one = drawn.lines[1], drawn.lines[2]
    assert zero.values == one.values  # they coincide...
    assert one.width < zero.width and one.z > zero.z  # ...and both show
    assert one.dashes != zero.dashes
    widths = [line.width for line in drawn.lines]
    assert widths == sorted(widths, reverse=True)


def test_the_axes_are_wall_clock_times_and_a_note_says_why_the_group_is_held_back() -> None:
    drawn = picture(reports())
    clock = drawn.lines[0]
    assert clock.times[0] == datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC)
    group = drawn.lines[-1]
    assert set(group.values) == {datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC)}
    assert drawn.notes == (
        "group ops/g: held by ops/s/1: no reader in the group: nobody reads ops/s/1",
    )


def test_the_picture_is_a_png(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "wm.png"
    assert plot(reports(), str(target)).notes
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
