"""The engine-free sensor demo, as `python -m examples.demo` prints it."""

from __future__ import annotations

import pytest

from examples import demo
from tests.demo_output import check_demo_lines


@pytest.mark.slow
def test_the_demo_prints_each_watermark_before_what_it_releases_and_reports_late_readings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    demo.main(rounds=3)
    lines = capsys.readouterr().out.splitlines()
    released, late = check_demo_lines(lines)
    assert (released, late) == (6, 3)  # A and B on time or early, C late, three rounds
    assert lines[-1].startswith("released 6 readings in event-time order, reported 3 late ones")
