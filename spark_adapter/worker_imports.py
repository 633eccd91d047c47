"""Keeps PySpark's per-task import-cache reset cheap in the Python workers that run tidemark tasks.

At the start of every Python task, PySpark 4.1's worker calls
``importlib.invalidate_caches()`` (``worker_util.setup_spark_files``). On
Python 3.10 and 3.11 that makes every zip importer in
``sys.path_importer_cache`` reread its archive's directory at once, and a
worker that imported PySpark from ``pyspark.zip`` (as Spark's workers do:
Spark puts the zip first on their ``PYTHONPATH``) holds one such importer per
PySpark package it has imported. Measured with pyspark 4.1.4 on Python 3.11:
tens of importers, 0.1 s to 0.4 s per task, before any of the task's own work.
CPython fixed the reread in 3.12 (gh-103200: invalidating only marks the
cache stale), and Spark after 4.1 calls the reset only when a task adds files
(SPARK-54744); neither is available with this project's pins.

:func:`release_archive_importers` removes the entries of archives that never
change while a worker lives (PySpark's ``pyspark.zip`` and py4j's source zip)
from ``sys.path_importer_cache``. That dictionary is a cache by contract:
the import system makes a new importer for a path when it next needs one,
and a zip importer's directory comes from zipimport's own cache, so nothing
is reread and no import changes. Every tidemark task calls it when it starts;
the worker's next task, whatever it runs, then resets only what is left.
Other entries, including archives a job adds with ``addPyFile``, are left
alone, so their invalidation works as before.
"""

from __future__ import annotations

import os
import sys
import zipimport

__all__ = ["is_spark_archive", "release_archive_importers", "spark_archive_importers"]

#: Python versions whose zipimporter rereads its archive on invalidate_caches (gh-103200).
_REREADS_ON_INVALIDATE = sys.version_info < (3, 12)


def is_spark_archive(archive: str) -> bool:
    """The archives Spark puts on a worker's path, which it never rewrites while the worker runs.

    PySpark's ``pyspark.zip``, py4j's source zip, and Spark's jars (Spark adds
    the jar of its own Python support classes, in case it bundles PySpark).
    """
    name = os.path.basename(archive)
    return (
        name == "pyspark.zip"
        or (name.startswith("py4j-") and name.endswith("-src.zip"))
        or name.endswith(".jar")
    )


def spark_archive_importers() -> list[str]:
    """The ``sys.path_importer_cache`` keys whose importer reads one of Spark's archives."""
    return [
        path
        for path, finder in list(sys.path_importer_cache.items())
        if isinstance(finder, zipimport.zipimporter) and is_spark_archive(finder.archive)
    ]


def release_archive_importers() -> int:
    """Drops the cached importers of Spark's own zips; returns how many were dropped.

    Safe anywhere: outside a Spark worker there is usually nothing to drop.
    A no-op on Python 3.12 and later, where invalidating a zip importer is cheap.
    """
    if not _REREADS_ON_INVALIDATE:
        return 0
    spark_zips = spark_archive_importers()
    for path in spark_zips:
        sys.path_importer_cache.pop(path, None)
    return len(spark_zips)
