"""The one writer of RESULTS.md: a benchmark's figures into its template, into its section.

:func:`record` runs a benchmark's measurement and fills its template
(``templates/NAME.md``, see :mod:`bench.template`) with its figures and the
facts of the run every section records (:class:`RunFacts`: the date, the
command, the load average before and after, the machine); then it prints the
section and puts it in the benchmark's own section of RESULTS.md, between its
``bench:NAME`` markers, keeping every other section as it is.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import re
import shlex
import sys
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bench._support import BenchFailure, load_average, machine_facts, signals_interrupt
from bench.figures import Figures
from bench.template import render

__all__ = ["RESULTS", "TEMPLATES", "RunFacts", "command_line", "record", "section", "write_section"]

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
RESULTS = os.path.join(BENCH_DIR, "RESULTS.md")
TEMPLATES = os.path.join(BENCH_DIR, "templates")
_PREAMBLE = """\
# Benchmark results

Figures written by the benchmarks in this folder (`python -m bench.run`, or
`make bench`). Each benchmark rewrites only its own section, between its
`bench:NAME` markers; everything else in this file is kept.
"""


@dataclass(frozen=True)
class RunFacts:
    """What every section records of its run, as ``{run.NAME}`` in a template.

    ``date``: the day the run ended (UTC, ISO); ``command``: the command that
    started it (:func:`command_line`); ``load_before``, ``load_after``: the
    1-minute load average before the measurement and after it; ``machine``:
    cores, CPU, RAM, OS, Python and the benchmark's ``software``; ``cores``:
    the machine's cores.
    """

    date: str
    command: str
    load_before: float
    load_after: float
    machine: str
    cores: int


def command_line() -> str:
    """The command that started this process, with paths relative to the repository.

    ``python -m bench.run store`` when run as a module, so the recorded
    command runs again from the repository root.
    """
    python = os.path.relpath(sys.executable, REPO_ROOT)
    if python.startswith(".."):  # an interpreter outside the repository: name it only
        python = "python"
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        started = ["-m", spec.name.removesuffix(".__main__")]
    else:
        script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO_ROOT)
        started = [os.path.basename(sys.argv[0]) if script.startswith("..") else script]
    return shlex.join([python, *started, *sys.argv[1:]])


def section(name: str, figures: Figures, run: RunFacts, templates: str = TEMPLATES) -> str:
    """Benchmark ``name``'s section: its template with ``figures`` and ``run`` filled in."""
    path = os.path.join(templates, f"{name}.md")
    with open(path, encoding="utf-8") as file:
        text = file.read()
    return render(text, ChainMap({"run": run}, _Attributes(figures)), f"templates/{name}.md")


class _Attributes(Mapping[str, Any]):
    """An object's attributes (properties too) as a mapping, for the template's lookups."""

    def __init__(self, target: object):
        self._target = target

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self._target, key)
        except AttributeError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        return (name for name in dir(self._target) if not name.startswith("_"))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def record(
    name: str,
    measure: Callable[[], Figures],
    *,
    results: str | None = RESULTS,
    templates: str = TEMPLATES,
) -> int:
    """Runs ``measure``, prints benchmark ``name``'s section and writes it into ``results``.

    ``results`` None: printed only. SIGTERM and SIGHUP unwind ``measure``
    like Ctrl-C, so the servers it started are stopped. Returns 0; 1 when
    ``measure`` raised :class:`BenchFailure` (nothing is written); 130 when
    interrupted.
    """
    try:
        with signals_interrupt():
            load_before = load_average()
            figures = measure()
            load_after = load_average()
    except BenchFailure as error:
        print(f"{name} benchmark failed: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as stop:
        print(
            f"{name} benchmark interrupted ({stop or 'SIGINT'}); servers stopped", file=sys.stderr
        )
        return 130
    run = RunFacts(
        date=datetime.datetime.now(datetime.UTC).date().isoformat(),
        command=command_line(),
        load_before=load_before,
        load_after=load_after,
        machine=machine_facts(*figures.software),
        cores=os.cpu_count() or 1,
    )
    markdown = section(name, figures, run, templates)
    print(markdown)
    print()
    for target, value in figures.targets.items():
        print(f"target {target}: {value}")
    if results is not None:
        write_section(name, markdown, results)
        print(f"written to {os.path.relpath(results)}")
    return 0


def write_section(name: str, markdown: str, path: str = RESULTS) -> None:
    """Puts ``markdown`` into benchmark ``name``'s section of the results file.

    The section sits between ``<!-- bench:NAME:begin -->`` and
    ``<!-- bench:NAME:end -->``; it is replaced if present, appended if not.
    """
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    block = f"{begin}\n{markdown.strip()}\n{end}\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.DOTALL)
    # Benchmarks finishing at the same time must not lose each other's sections.
    with _locked(os.path.dirname(os.path.abspath(path))):
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except FileNotFoundError:
            text = _PREAMBLE
        if pattern.search(text):
            text = pattern.sub(lambda _: block, text, count=1)
        else:
            text = text.rstrip("\n") + "\n\n" + block
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(tmp, path)


@contextlib.contextmanager
def _locked(directory: str) -> Iterator[None]:
    """Holds an exclusive lock on ``directory`` itself, so no lock file is left behind."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
