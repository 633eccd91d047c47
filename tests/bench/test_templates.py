"""Each benchmark's template reads only figures its benchmark returns, and renders made-up ones.

A benchmark whose engine is not installed here is checked in its engine's
environment (``make test`` runs this folder in both).
"""

from __future__ import annotations

import dataclasses
import importlib.machinery
import pathlib
import re
import sys
import types
import typing

import pytest

from bench._support import BenchFailure
from bench.figures import Target
from bench.registry import BENCHMARKS, Benchmark
from bench.results import RunFacts, command_line, record, section
from bench.template import fields
from tests.bench.fakes import FAKES

RUN = RunFacts("2026-01-02", ".venv/bin/python -m bench.run NAME", 0.5, 0.75, "2 cores", 2)
#: The benchmarks whose engine this environment has; the others are the other run's.
EACH = [pytest.param(b, id=b.name) for b in BENCHMARKS if b.installed()]


@pytest.mark.parametrize("benchmark", EACH)
def test_a_template_reads_only_figures_its_benchmark_returns(benchmark: Benchmark) -> None:
    text = pathlib.Path(benchmark.template).read_text(encoding="utf-8")
    figures = typing.get_type_hints(benchmark.load().measure)["return"]
    known = {f.name for f in dataclasses.fields(figures)} | set(dir(figures))
    assert {"software", "targets"} <= known
    assert "run" not in known  # {run.NAME} is the writer's
    assert fields(text, benchmark.template) - {"run"} <= known
    assert set(re.findall(r"\{run\.(\w+)", text)) <= {f.name for f in dataclasses.fields(RunFacts)}


@pytest.mark.parametrize("benchmark", EACH)
def test_a_template_renders_made_up_figures(benchmark: Benchmark) -> None:
    text = section(benchmark.name, FAKES[benchmark.name](), RUN)
    assert text.startswith("## ")
    assert RUN.command in text
    assert "{" not in text
    assert "}" not in text


def test_every_benchmark_has_made_up_figures() -> None:
    assert set(FAKES) == {b.name for b in BENCHMARKS}


def test_this_environment_checks_the_engine_free_benchmarks_and_its_engines() -> None:
    checked = {b.name for b in BENCHMARKS if b.installed()}
    assert {b.name for b in BENCHMARKS if b.needs is None} <= checked
    assert len(checked) < len(BENCHMARKS)  # the other engine's are checked in its environment


@dataclasses.dataclass(frozen=True)
class _Demo:
    count: int
    software: tuple[str, ...] = ()

    @property
    def targets(self) -> dict[str, Target]:
        return {"count": Target(self.count, ">=", 1_000)}


def test_the_writer_replaces_its_own_section_and_keeps_the_others(tmp_path: pathlib.Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "demo.md").write_text(
        "## Demo\n\n{count:,} events on {run.cores} cores: {targets[count]:met|MISSED}.\n\n"
        "```sh\n{run.command}\n```\n"
    )
    other = "<!-- bench:other:begin -->\n## Other\n\nkept as it is\n<!-- bench:other:end -->\n"
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n" + other)

    assert record("demo", lambda: _Demo(1_234), results=str(results), templates=str(templates)) == 0
    assert record("demo", lambda: _Demo(99), results=str(results), templates=str(templates)) == 0

    text = results.read_text()
    assert text.startswith("# Benchmark results\n\n" + other + "\n<!-- bench:demo:begin -->\n")
    assert text.count("## Demo") == 1
    assert "99 events on " in text
    assert ": MISSED." in text
    assert re.search(r"```sh\n\S.*\n```", text)  # the command that ran


def test_the_command_recorded_is_the_one_that_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    main = types.ModuleType("__main__")
    main.__spec__ = importlib.machinery.ModuleSpec("bench.run", None)
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", ["/anywhere/bench/run.py", "store", "--events", "10"])
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    assert command_line() == "python -m bench.run store --events 10"


def test_a_failed_benchmark_writes_nothing(tmp_path: pathlib.Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n")

    def failing() -> _Demo:
        msg = "a check failed"
        raise BenchFailure(msg)

    assert record("demo", failing, results=str(results), templates=str(tmp_path)) == 1
    assert results.read_text() == "# Benchmark results\n"
