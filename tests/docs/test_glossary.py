"""The glossary (docs/glossary.md) names every figure the tools expose, and no other.

Against what they really expose: a real server's ``/metrics`` after a
workload that touches every metric, the metrics the Flink source registers
(read from its source, so no Flink runs) and the figures the Spark source
puts in its offsets.
"""

from __future__ import annotations

import ast
import re

from connector.groups.progress import Diagnosis, GroupProgress
from connector.server import StoreServer
from spark_adapter.reading import _figures
from tests.layers import ROOT
from tests.ops.test_metrics import (  # noqa: F401 - the fixtures
    exposition,
    run_a_workload_that_touches_every_metric,
    server,
    tokens,
)

GLOSSARY = (ROOT / "docs" / "glossary.md").read_text()


def _section(title: str) -> str:
    return GLOSSARY.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _metric_names(text: str) -> set[str]:
    return {name.removesuffix("_total") for name in re.findall(r"`(tidemark_[a-z0-9_]+)`", text)}


def test_the_glossary_names_every_metric_the_server_exposes_and_no_retired_one(
    server: StoreServer,  # noqa: F811
    tokens,  # noqa: F811
    clock,
) -> None:
    run_a_workload_that_touches_every_metric(server, tokens, clock)
    assert server.metrics_address is not None
    exposed = {
        line.split()[2].removesuffix("_total")
        for line in exposition(server.metrics_address).splitlines()
        if line.startswith("# TYPE tidemark_")
    }
    listed = _metric_names(_section("Every metric the server exposes"))
    assert exposed - listed == set()
    assert listed - exposed == set()
    rows = [row for row in _section("Retired names").splitlines() if row.startswith("| `")]
    retired = {name for row in rows for name in _metric_names(row.split("|")[1])}
    assert len(retired) == 4 and retired & exposed == set()


def test_the_glossary_names_every_figure_of_the_flink_source_and_the_spark_offsets() -> None:
    functions = ast.parse((ROOT / "flink_adapter" / "functions.py").read_text())
    registered = {
        node.value
        for node in ast.walk(functions)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"(processing|event)Time(Watermark|DelayMs)", node.value)
    }
    assert len(registered) == 4
    assert {n for n in registered if f"`tidemark.{n}`" not in GLOSSARY} == set()
    figures = _figures(GroupProgress(0, 0, 0, 0, 0, 0, Diagnosis.HEALTHY))
    assert {k for k in figures if f"`{k}`" not in GLOSSARY} == set()
    assert "`unreadEvents`" in GLOSSARY and "`processingTimeDelayMs`" in GLOSSARY
