"""The template format of the benchmarks' RESULTS.md sections, and a target's verdict."""

from __future__ import annotations

import pytest

from bench.figures import Target
from bench.template import TemplateError, fields, render

TEMPLATE = """\
## {title}

| n | system | events/s |
| --- | --- | ---: |
% for run in runs
| {loop.index} | {run[system]} | {run[rate]:,.0f} |
% end
% if not redis
No Redis.
% else
Redis: {redis:,}.
% end
% for name, us in cpu
- {name}: {us:.2f} µs
% end
Outages: {outages!j:, |{0:.2f}} s; {{braces}} kept."""


def test_a_template_repeats_loops_keeps_one_branch_and_joins_lists() -> None:
    figures = {
        "title": "T",
        "runs": [{"system": "file", "rate": 1234.5}, {"system": "jetstream", "rate": 99.0}],
        "redis": None,
        "cpu": {"client": 1.234, "server": 2.0},
        "outages": [1.0, 2.345],
    }
    assert render(TEMPLATE, figures) == (
        "## T\n\n| n | system | events/s |\n| --- | --- | ---: |\n"
        "| 1 | file | 1,234 |\n| 2 | jetstream | 99 |\n"
        "No Redis.\n- client: 1.23 µs\n- server: 2.00 µs\n"
        "Outages: 1.00, 2.35 s; {braces} kept."
    )
    assert "Redis: 7,000." in render(TEMPLATE, {**figures, "redis": 7000})


def test_the_names_a_template_reads_leave_out_loop_names() -> None:
    assert fields(TEMPLATE) == {"title", "runs", "redis", "cpu", "outages"}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a\n{missing:.1f}", "t.md, line 2: no figure 'missing'"),
        ("{n:.2f}", "t.md, line 1: {n:.2f} cannot format 'x'"),
        ("% if n\nx", "t.md, line 1: block not closed"),
        ("x\n% end", "t.md, line 2: `% end` with no block open"),
        ("% while n", "t.md, line 1: unknown directive 'while'"),
        (
            "% for a, b in pairs\n{a}\n% end",
            "t.md, line 1: 1 values in an item of 'pairs' for 2 names",
        ),
    ],
)
def test_a_bad_template_or_field_is_named_with_its_line(text: str, error: str) -> None:
    with pytest.raises(TemplateError, match="^" + error.replace("{", r"\{").replace("(", r"\(")):
        render(text, {"n": "x", "pairs": [(1,)]}, "t.md")


def test_a_target_reads_met_missed_or_not_measured_in_its_own_words() -> None:
    assert f"{Target(150_001, '>=', 150_000)}" == "met"
    assert f"{Target(149_999, '>=', 150_000):met|MISSED}" == "MISSED"
    assert f"{Target(1.0, '<', None):met|MISSED|n/a}" == "n/a"
    assert f"{Target(None, '<', 50):met|MISSED}" == "not measured"
    assert str(Target(149_999.4, ">=", 150_000, "events/s")) == (
        "149,999 events/s >= 150,000 events/s: missed"
    )
    with pytest.raises(ValueError, match="op '=>' is not one of"):
        Target(1, "=>", 2)
