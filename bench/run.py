"""Runs the benchmarks of this folder and keeps their figures in RESULTS.md.

    python -m bench.run                      # every benchmark this environment has, defaults
    python -m bench.run store                # only the store benchmark
    python -m bench.run store --events 100000 --no-write
    python -m bench.run store --results /tmp/RESULTS.md   # write to another copy
    python -m bench.run --list
    .venv-flink/bin/python -m bench.run flink   # the Flink benchmark, in the Flink environment

Run from the repository root. The benchmarks are listed in
:mod:`bench.registry`. Run with every name left out, a benchmark whose engine
is not installed in this environment is skipped, saying so (``make bench``
runs each in its own). Arguments after the names are passed to every
benchmark that runs, with two of the runner's own: ``--no-write`` (print the
section only) and ``--results PATH`` (the file to write it to). Each
benchmark's section replaces only its own part of RESULTS.md.
"""

from __future__ import annotations

import sys

from bench.registry import BENCHMARKS, Benchmark, named
from bench.results import RESULTS, record

__all__ = ["main"]


def run(benchmark: Benchmark, argv: list[str]) -> int:
    """Runs one benchmark with options ``argv``; its exit status."""
    module = benchmark.load()
    parser = module.options()
    parser.prog = f"python -m bench.run {benchmark.name}"
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    parser.add_argument("--results", default=RESULTS, help="the file to write (RESULTS.md)")
    args = parser.parse_args(argv)
    results = None if args.no_write else args.results
    return record(benchmark.name, lambda: module.measure(args), results=results)


def main(argv: list[str] | None = None) -> int:
    """Runs the named benchmarks (all when none is named); returns the worst exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    names = [b.name for b in BENCHMARKS]
    if args[:1] in (["--list"], ["-l"]):
        print("\n".join(names))
        return 0
    if args[:1] in (["--help"], ["-h"]):
        print(__doc__.strip())
        print("\nbenchmarks: " + ", ".join(names))
        return 0
    chosen: list[Benchmark] = []
    while args and not args[0].startswith("-"):
        name = args.pop(0).removesuffix(".py").removesuffix("_bench")
        try:
            chosen.append(named(name))
        except KeyError as unknown:
            print(unknown.args[0], file=sys.stderr)
            return 2
    status = 0
    for benchmark in chosen or BENCHMARKS:
        print(f"=== {benchmark.name} ===", flush=True)
        if not benchmark.installed():
            if chosen:
                print(f"{benchmark.needs!r} is not installed here", file=sys.stderr)
                return 2
            # Each engine has its own environment: the other engine's benchmark runs in that one.
            print(f"skipped: {benchmark.needs!r} is not installed here; run it in its engine's")
            continue
        status = max(status, run(benchmark, args))
    return status


if __name__ == "__main__":
    sys.exit(main())
