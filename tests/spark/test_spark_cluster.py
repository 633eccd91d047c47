"""The source on a Spark standalone cluster by docs/spark.md's recipe: an executor killed, once.

What it adds to the local-mode tests: the source's read tasks run in
executor processes apart from the driver (each opens its own connection
with the TLS and token files, which only those files give it), the
stateful ordering keeps its state in a checkpoint the executors share, and
an executor dies with SIGKILL in the middle of the query. The cluster (a
master and two workers of one core, separate JVMs) and the job are the
page's commands as written (:mod:`tests.spark.standalone`); the job is
``examples/spark_reader.py`` writing JSON files with Spark's file sink, the
store a server process with TLS and a read-only token
(:mod:`tests.spark.secure_server`).

The checks: every event in the output once, each key's in the order
written (output files taken in the order the file sink committed them),
none flagged late (event time is the ingestion time, lag 0: an event
flagged late would mean a watermark passed an event not yet read).
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import wait_until

from .secure_server import event_json, start_secure_server
from .standalone import ReadmeCluster, command_line, descendants

pytestmark = [pytest.mark.slow, pytest.mark.long]

KEYS = [f"k{n}" for n in range(6)]


def committed_rows(output: pathlib.Path) -> list[dict[str, Any]]:
    """The output's rows in the order the file sink committed them (its metadata log)."""
    log = output / "_spark_metadata"
    if not log.is_dir():
        return []
    batches = sorted(
        (int(p.name.removesuffix(".compact")), p)
        for p in log.iterdir()
        if p.name.removesuffix(".compact").isdigit()
    )
    paths: list[str] = []
    for _, path in batches:
        for line in path.read_text().splitlines()[1:]:  # after the log's version line
            name = json.loads(line)["path"].removeprefix("file://")
            if name not in paths:
                paths.append(name)
    texts = [pathlib.Path(name).read_text() for name in paths]
    return [json.loads(line) for text in texts for line in text.splitlines()]


def test_a_query_on_a_standalone_cluster_survives_a_killed_executor_exactly_once(
    spawn_server: Callable[..., Any], tmp_path: pathlib.Path
) -> None:
    server = start_secure_server(spawn_server, tmp_path / "store")
    server.create_stream("iot/sensors", segments=2)
    written = server.write("iot/sensors", KEYS, range(20))
    output = tmp_path / "shared" / "output"
    cluster = ReadmeCluster(
        tmp_path / "spark",
        {
            "tidemark://127.0.0.1:7070": server.uri,
            "/etc/tidemark/ca.pem": server.ca_file,
            "/etc/tidemark/reader.token": server.token_files["reader"],
            "/shared/checkpoints/sensors": str(tmp_path / "shared" / "checkpoint"),
            "/shared/output/sensors": str(output),
        },
    )
    try:
        cluster.start()
        cluster.submit()
        wait_until(
            lambda: len(committed_rows(output)) >= len(written) or _failed(cluster),
            timeout=240,
            interval=0.5,
            what="the first events in the output",
        )
        assert not _failed(cluster), cluster.log()[-5000:]

        # The read tasks ran in the executors' own Python workers, not in the driver.
        executors = cluster.executors()
        assert len(executors) == 2, executors
        assert cluster.job is not None
        assert not set(executors) & set(descendants(cluster.job.pid))
        python_workers = {e: _python_workers(e) for e in executors}
        assert all(python_workers.values()), python_workers

        # New events; an executor running a task of the query dies with its Python workers.
        written += server.write("iot/sensors", KEYS, range(20, 40))
        victim = wait_until(cluster.busy_executor, timeout=120, what="an executor running a task")
        for pid in [victim, *descendants(victim)]:
            os.kill(pid, signal.SIGKILL)
        wait_until(
            lambda: len(committed_rows(output)) >= len(written) or _failed(cluster),
            timeout=300,
            interval=0.5,
            what="every event in the output after the executor was killed",
        )
        assert not _failed(cluster), cluster.log()[-5000:]
        assert victim not in cluster.executors()
        # The driver saw the executor go. Whether a task died with it (ExecutorLostFailure)
        # is a race the kill cannot force: the task seen running may finish before the kill.
        # The driver hears of the loss from the master once the worker saw the process exit,
        # which can come after the output is complete.
        wait_until(
            lambda: "Lost executor" in cluster.log(),
            timeout=60,
            interval=0.5,
            what="the driver's report of the lost executor",
        )
    finally:
        cluster.stop()

    rows = committed_rows(output)
    assert Counter((r["routing_key"], r["event"]) for r in rows) == Counter(
        (key, event_json(key, seq)) for key, seq in written
    )
    for key in KEYS:
        assert [r["event"] for r in rows if r["routing_key"] == key] == [
            event_json(key, seq) for seq in range(40)
        ]
    assert not [r for r in rows if r["late"]]


def _failed(cluster: ReadmeCluster) -> bool:
    return cluster.job is not None and cluster.job.poll() is not None


def _python_workers(executor: int) -> list[int]:
    return [pid for pid in descendants(executor) if "pyspark" in command_line(pid)]
