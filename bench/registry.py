"""Every benchmark ``python -m bench.run`` knows: its name, its module, the engine it needs.

Adding a benchmark ``NAME`` takes three things:

1. a module ``bench/NAME_bench.py`` with ``options() -> argparse.ArgumentParser``
   (its own options) and ``measure(args) -> NameFigures``: it measures, checks,
   and returns its figures and targets as a frozen dataclass (see
   :mod:`bench.figures`), annotated as the return type; no prose;
2. a template ``bench/templates/NAME.md``: the section of RESULTS.md it
   writes, with its figures and ``{run.date}``, ``{run.command}``,
   ``{run.load_before}`` ... as placeholders (see :mod:`bench.template` and
   :class:`bench.results.RunFacts`);
3. an entry below;

and a builder of made-up figures in ``tests/bench/fakes.py``:
``tests/bench/test_templates.py`` checks that every template reads only
figures its benchmark returns, and renders it with the made-up ones.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType

__all__ = ["BENCHMARKS", "Benchmark", "named"]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark: ``name`` is its RESULTS.md section and its template ``templates/NAME.md``.

    ``module``: the module with its ``options()`` and ``measure(args)``;
    ``needs``: the engine package only one environment has (``pyspark``,
    ``pyflink``), None when any environment runs it.
    """

    name: str
    module: str
    needs: str | None = None

    def installed(self) -> bool:
        """Whether this environment can run it (its engine is installed)."""
        return self.needs is None or importlib.util.find_spec(self.needs) is not None

    def load(self) -> ModuleType:
        """Its module, imported."""
        return importlib.import_module(self.module)

    @property
    def template(self) -> str:
        """The path of its template."""
        return os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "templates", f"{self.name}.md"
        )


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("store", "bench.store_bench"),
    Benchmark("store_load", "bench.store_load_bench"),
    Benchmark("jetstream", "bench.jetstream_bench"),
    Benchmark("nemesis", "bench.nemesis_bench"),
    Benchmark("reader", "bench.reader_bench"),
    Benchmark("event_time", "bench.event_time_bench"),
    Benchmark("percentile", "bench.percentile_bench"),
    Benchmark("spark", "bench.spark_bench", needs="pyspark"),
    Benchmark("spark_latency", "bench.spark_latency_bench", needs="pyspark"),
    Benchmark("spark_profile", "bench.spark_profile_bench", needs="pyspark"),
    Benchmark("event_time_spark", "bench.event_time_spark_bench", needs="pyspark"),
    Benchmark("scale", "bench.scale_bench", needs="pyspark"),
    Benchmark("flink", "bench.flink_bench", needs="pyflink"),
    Benchmark("event_time_flink", "bench.event_time_flink_bench", needs="pyflink"),
    Benchmark("scale_flink", "bench.scale_flink_bench", needs="pyflink"),
)


def named(name: str) -> Benchmark:
    """The benchmark called ``name``; KeyError naming the ones there are."""
    for benchmark in BENCHMARKS:
        if benchmark.name == name:
            return benchmark
    msg = f"no benchmark {name!r}; there are {', '.join(b.name for b in BENCHMARKS)}"
    raise KeyError(msg)
