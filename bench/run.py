"""Runs the benchmarks in this folder and keeps their figures in RESULTS.md.

    python bench/run.py                      # every benchmark, default settings
    python bench/run.py store                # only bench/store_bench.py
    python bench/run.py store --events 100000
    python bench/run.py --list
    .venv-flink/bin/python bench/run.py flink   # the Flink benchmark, in the Flink environment

A benchmark is a module ``bench/NAME_bench.py`` with ``main(argv) -> int``.
Run with every name left out, a benchmark whose engine is not installed in
this environment is skipped, saying so (``make bench`` runs each in its own).
Arguments after the names are passed to every benchmark that runs. A
benchmark records its figures with :func:`write_section`, which replaces only
that benchmark's own section of RESULTS.md, so sections of other benchmarks
survive.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import re
import shlex
import sys
from collections.abc import Iterator
from types import ModuleType

__all__ = ["BENCH_DIR", "RESULTS", "available", "command_line", "main", "write_section"]

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
RESULTS = os.path.join(BENCH_DIR, "RESULTS.md")
_SUFFIX = "_bench.py"
_PREAMBLE = """\
# Benchmark results

Figures written by the benchmarks in this folder (`python bench/run.py`, or
`make bench`). Each benchmark rewrites only its own section, between its
`bench:NAME` markers; everything else in this file is kept.
"""


def available() -> list[str]:
    """Names of the benchmarks present: ``store`` for ``store_bench.py``."""
    return sorted(f[: -len(_SUFFIX)] for f in os.listdir(BENCH_DIR) if f.endswith(_SUFFIX))


def _load(name: str) -> ModuleType:
    if BENCH_DIR not in sys.path:
        sys.path.insert(0, BENCH_DIR)
    path = os.path.join(BENCH_DIR, name + _SUFFIX)
    spec = importlib.util.spec_from_file_location(f"{name}_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def command_line() -> str:
    """The command that started this process, with paths relative to the repository."""
    python = os.path.relpath(sys.executable, REPO_ROOT)
    if python.startswith(".."):  # an interpreter outside the repository: name it only
        python = "python"
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO_ROOT)
    if script.startswith(".."):
        script = os.path.basename(sys.argv[0])
    return shlex.join([python, script, *sys.argv[1:]])


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


def main(argv: list[str] | None = None) -> int:
    """Runs the named benchmarks (all when none is named); returns the worst exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    names = available()
    if args[:1] in (["--list"], ["-l"]):
        print("\n".join(names))
        return 0
    if args[:1] in (["--help"], ["-h"]):
        print(__doc__.strip())
        print("\nbenchmarks: " + ", ".join(names))
        return 0
    chosen: list[str] = []
    while args and not args[0].startswith("-"):
        name = args.pop(0).removesuffix(_SUFFIX).removesuffix("_bench")
        if name not in names:
            print(f"no benchmark {name!r}; present: {', '.join(names)}", file=sys.stderr)
            return 2
        chosen.append(name)
    status = 0
    for name in chosen or names:
        print(f"=== {name} ===", flush=True)
        try:
            module = _load(name)
        except ModuleNotFoundError as missing:
            if chosen:
                raise
            # Each engine has its own environment: the other engine's benchmark runs in that one.
            print(f"skipped: {missing.name!r} is not installed here; run it in its engine's")
            continue
        status = max(status, int(module.main(args) or 0))
    return status


if __name__ == "__main__":
    sys.exit(main())
