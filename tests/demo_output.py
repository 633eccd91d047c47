"""What the demos print, checked the same way for each.

Times people can read beside epoch milliseconds, each watermark covering the
readings it releases, late readings reported (never "discarded").
"""

from __future__ import annotations

import datetime
import re

_WATERMARK = re.compile(r"^Advancing the event time watermark: Watermark @ (\d+)  (\S+)$")
_READING = re.compile(r"^  \((\d+),([A-Z])\)  (\S+)  seq (\d+)$")
_LATE = re.compile(r"^Late \(reported, not dropped\): \((\d+),([A-Z])\)  (\S+)  seq (\d+)$")


def _utc_ms(text: str) -> int:
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert moment.utcoffset() == datetime.timedelta(0), text
    return round(moment.timestamp() * 1000)


def check_demo_lines(lines: list[str]) -> tuple[int, int]:
    """Checks the demo's lines; returns how many readings were released and how many late."""
    released = late = 0
    watermark: int | None = None
    for line in lines:
        if found := _WATERMARK.match(line):
            watermark = int(found.group(1))
            assert _utc_ms(found.group(2)) == watermark, line
        elif found := _READING.match(line):
            ts = int(found.group(1))
            assert _utc_ms(found.group(3)) == ts, line
            assert watermark is not None and ts <= watermark, f"{line!r} after {watermark}"
            released += 1
        elif found := _LATE.match(line):
            assert _utc_ms(found.group(3)) == int(found.group(1)), line
            assert found.group(2) == "C", line
            late += 1
        assert "Discarded" not in line, line
    return released, late
