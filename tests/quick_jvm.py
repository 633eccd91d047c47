"""JVM options for the Spark and Flink JVMs the tests start by documented commands.

Those JVMs live a minute or two and do little work on little data: most of
their CPU goes to starting and to the JIT's optimizing compiler, on a
machine the tests share. The client compiler alone
(``-XX:TieredStopAtLevel=1``) and the serial collector cut that (measured
alone on a busy 2-core machine: the standalone Spark cluster's test from
128 s to 81 s, the reader example's from 61 s to 36-45 s, the quickstart's
from 62 s to 44 s). They change how fast the JVM runs, nothing
of what it does: the commands run as written, the options come from the
configuration folder beside them (``SPARK_CONF_DIR``, ``FLINK_CONF_DIR``).
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping

__all__ = ["QUICK_JVM", "spark_conf_dir"]

QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_conf_dir(folder: pathlib.Path, settings: Mapping[str, str] | None = None) -> pathlib.Path:
    """``folder`` made a ``SPARK_CONF_DIR``: its driver and executors with :data:`QUICK_JVM`.

    ``settings`` go into its ``spark-defaults.conf`` too. Returns ``folder``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    lines = {
        "spark.driver.extraJavaOptions": QUICK_JVM,
        "spark.executor.extraJavaOptions": QUICK_JVM,
        **(settings or {}),
    }
    (folder / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in lines.items()))
    return folder
