"""The adapter on a Flink standalone cluster: docs/flink.md's recipe, a TaskManager killed, once.

One job, submitted the way docs/flink.md says users go past one machine: its
commands run as written (a JobManager and a TaskManager from the scripts
apache-flink ships, the job given to ``flink run -py`` with the interpreters
and path they name: :mod:`examples.flink_cluster_job`), a store server in a
process of its own. The source's functions must say over the REST API that
they run in process mode, PyFlink's default, which the source leaves as it
is. Once the job has finished part files for the first
events (so a checkpoint completed), the TaskManager is killed with SIGKILL
and a new one started with the page's command; the job restores from its
last checkpoint and goes on. Every event written must be in the finished
files exactly once.
"""

from __future__ import annotations

import json
import pathlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from tests.readme import DOCS, localized, shell_block

from .standalone import standalone_cluster

pytestmark = [pytest.mark.slow, pytest.mark.long]

_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _finished_events(output: pathlib.Path) -> list[int]:
    """The events in the finished part files (in-progress and pending ones are hidden)."""
    return [
        json.loads(line)["n"]
        for part in output.rglob("part-*")
        if not part.name.startswith(".")
        for line in part.read_text().splitlines()
    ]


def _write(client: StoreClient, numbers: range) -> None:
    with EventWriter(client, "x/s", JsonSerializer()) as writer:
        for n in numbers:
            writer.write_event({"n": n}, routing_key=f"k{n % 5}")


def test_a_job_run_with_flink_run_survives_a_killed_task_manager_exactly_once(
    spawn_server: Callable[..., Any], tmp_path: pathlib.Path, wait_until: Callable[..., Any]
) -> None:
    server = spawn_server(tmp_path / "store")
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("x")
    StreamManager(client).create_stream("x", "s", 2)
    output = tmp_path / "output"
    _write(client, range(200))

    recipe = shell_block("flink_adapter.pythonpath", DOCS / "flink.md")
    exports = [command for command in recipe if command.startswith("export ")]
    [start_task_manager] = [command for command in recipe if "taskmanager.sh start" in command]
    places = {
        "tidemark://HOST:7070": server.uri,
        "iot/sensors": "x/s",
        "file:///data/sensors": f"{output.as_uri()} --checkpoint-ms 500",
    }
    with standalone_cluster(tmp_path / "flink") as cluster:
        job = cluster.job_id(cluster.shell(localized("".join(recipe), places), _ROOT))
        source = "Tidemark source: x/s"
        wait_until(
            lambda: len(cluster.metric(job, source, "tidemark.pythonThreadMode")) == 2,
            timeout=120,
            interval=0.5,
            what="the reader subtasks' metrics",
        )
        assert cluster.metric(job, source, "tidemark.pythonThreadMode") == [0, 0], "process mode"
        wait_until(
            lambda: len(_finished_events(output)) >= 200,
            timeout=120,
            interval=0.5,
            what="the first 200 events in finished part files",
        )
        cluster.kill_task_manager()
        _write(client, range(200, 400))
        cluster.shell("".join([*exports, start_task_manager]), _ROOT)
        wait_until(
            lambda: cluster.checkpoints(job)["latest"]["restored"] is not None,
            timeout=120,
            interval=0.5,
            what="the job to restore from a checkpoint",
        )
        wait_until(
            lambda: len(_finished_events(output)) >= 400,
            timeout=240,
            interval=0.5,
            what="all 400 events in finished part files",
        )
        # Two more checkpoints: a repeat would have been finished by now.
        completed = cluster.checkpoints(job)["counts"]["completed"]
        wait_until(
            lambda: cluster.checkpoints(job)["counts"]["completed"] >= completed + 2,
            timeout=60,
            interval=0.5,
            what="two more checkpoints",
        )
        events = Counter(_finished_events(output))
        restored = cluster.checkpoints(job)["latest"]["restored"]
    client.close()

    assert sorted(events) == list(range(400)), "every event is in the output"
    assert [n for n, times in events.items() if times > 1] == [], "no event is there twice"
    assert restored["is_savepoint"] is False
