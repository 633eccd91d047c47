"""Registering the ``tidemark`` format, and a local SparkSession for this interpreter with it.

What the demo, the tests and the benchmarks each built by hand: Spark's
Python workers must run the interpreter that has this package
(``PYSPARK_PYTHON``), and a local session wants no UI and few shuffle
partitions.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session", "register"]

#: Settings for Spark's Python workers, on a cluster too: PySpark's own
#: applyInPandasWithState (under ``order_by_event_time``) makes pandas warn
#: (a FutureWarning of DataFrame concatenation) on every micro-batch; the
#: workers leave that one out of their output, and no other.
WORKER_CONFIG = {
    "spark.executorEnv.PYTHONWARNINGS": (
        "ignore:The behavior of DataFrame concatenation with empty:FutureWarning"
    ),
}

#: The settings every local session here starts from.
LOCAL_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    **WORKER_CONFIG,
}


def register(spark: SparkSession) -> None:
    """Makes the ``tidemark`` format available in ``spark``; registering twice is harmless."""
    from spark_adapter.source import TidemarkDataSource

    spark.dataSource.register(TidemarkDataSource)


def local_session(
    app_name: str = "tidemark",
    master: str = "local[2]",
    config: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
) -> SparkSession:
    """A SparkSession on ``master`` whose Python workers run this interpreter.

    ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` are set to this
    interpreter unless set already; :data:`LOCAL_CONFIG`, then ``config``,
    are its settings; the ``tidemark`` format is registered. Returns the
    active session when there is one (Spark's ``getOrCreate``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_CONFIG, **(config or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    register(session)
    return session
