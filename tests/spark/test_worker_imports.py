"""Releasing the cached importers of Spark's own archives in Python workers."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_adapter import worker_imports
from spark_adapter.worker_imports import release_archive_importers


def _archive(path: Path, package: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "VALUE = 1\n")
        archive.writestr(f"{package}/later.py", "VALUE = 2\n")
    return path


@pytest.fixture
def archives(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A ``pyspark.zip``-named archive and a user's zip on ``sys.path``, each with a package."""
    spark_dir = tmp_path / "spark"
    spark_dir.mkdir()
    paths = {
        "tm_spark_pkg": str(_archive(spark_dir / "pyspark.zip", "tm_spark_pkg")),
        "tm_user_pkg": str(_archive(tmp_path / "user.zip", "tm_user_pkg")),
    }
    sys.path[:0] = paths.values()
    try:
        yield paths
    finally:
        for path in paths.values():
            sys.path.remove(path)
        for name in list(sys.modules):
            if name.split(".")[0] in paths:
                del sys.modules[name]
        for key in [k for k in sys.path_importer_cache if k.startswith(str(tmp_path))]:
            del sys.path_importer_cache[key]


def _cached_archives() -> set[str]:
    return {
        finder.archive
        for finder in sys.path_importer_cache.values()
        if isinstance(finder, zipimport.zipimporter)
    }


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="only Python < 3.12 rereads zips")
def test_drops_only_spark_archives_and_imports_keep_working(archives: dict[str, str]) -> None:
    import tm_spark_pkg  # noqa: F401
    import tm_user_pkg  # noqa: F401

    assert {archives["tm_spark_pkg"], archives["tm_user_pkg"]} <= _cached_archives()

    assert release_archive_importers() >= 1

    cached = _cached_archives()
    assert archives["tm_spark_pkg"] not in cached
    assert archives["tm_user_pkg"] in cached
    # A module not imported before still comes from the same archive.
    later = importlib.import_module("tm_spark_pkg.later")
    assert later.VALUE == 2
    assert later.__file__.startswith(archives["tm_spark_pkg"])


def test_does_nothing_where_invalidating_is_cheap(
    archives: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_imports, "_REREADS_ON_INVALIDATE", False)
    import tm_spark_pkg  # noqa: F401

    assert release_archive_importers() == 0
    assert archives["tm_spark_pkg"] in _cached_archives()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="only Python < 3.12 rereads zips")
def test_in_a_spark_worker_the_next_reset_has_no_spark_archive_left(spark: object) -> None:
    """In Spark's real workers: what a task leaves for the next task's invalidate_caches()."""

    def probe(batches: Iterator[object]) -> Iterator[object]:
        import importlib as worker_importlib
        import os as worker_os

        import pandas as pd

        from spark_adapter.worker_imports import release_archive_importers as release
        from spark_adapter.worker_imports import spark_archive_importers

        def spark_archives() -> int:
            return len(spark_archive_importers())

        for _ in batches:
            pass
        before = spark_archives()
        dropped = release()
        # A PySpark module this worker has not imported yet, then the next task's reset.
        avro = worker_importlib.import_module("pyspark.sql.avro.functions")
        worker_importlib.invalidate_caches()
        release()
        yield pd.DataFrame(
            {
                "pid": [worker_os.getpid()],
                "before": [before],
                "dropped": [dropped],
                "after": [spark_archives()],
                "from_zip": ["pyspark.zip" in avro.__file__],
            }
        )

    rows = (
        spark.range(4)  # type: ignore[attr-defined]
        .repartition(2)
        .mapInPandas(probe, "pid long, before long, dropped long, after long, from_zip boolean")
        .collect()
    )
    assert len(rows) == 2
    for row in rows:
        # Spark's workers import PySpark from pyspark.zip: there were importers to drop.
        assert row.dropped == row.before
        assert row.from_zip
        assert row.after == 0


def test_tidemark_tasks_release_when_they_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_adapter import reading
    from spark_adapter.options import TidemarkOptions
    from spark_adapter.schema import tidemark_schema

    calls: list[int] = []
    monkeypatch.setattr(reading, "release_archive_importers", lambda: calls.append(1) or 0)
    options = TidemarkOptions.parse({"uri": "127.0.0.1:1", "stream": "s/t"})
    reader = reading.TidemarkBatchReader(options, tidemark_schema("string"))

    assert list(reader.read(reading.TidemarkPartition((), None))) == []
    assert calls == [1]
