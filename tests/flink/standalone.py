"""A Flink standalone cluster from the scripts apache-flink ships, for one test.

:func:`standalone_cluster` copies the package's ``conf`` folder into a folder
of the test's and sets there what is the test's own: free ports, fast
failure detection, metrics fresh every second, a restart strategy, file
checkpoints, folders for logs and temporary files and JVMs quick to start. The
test starts the cluster with docs/flink.md's commands, run with
``FLINK_CONF_DIR`` pointing there (:attr:`StandaloneCluster.env`), which set
everything else (the interpreters, the slots). Afterwards it kills every
process of the cluster with SIGKILL, the Python workers too (nothing of the
cluster is looked at after the test; ``bin/stop-cluster.sh``'s graceful stop
took a quarter of a minute).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pyflink
import yaml

from tests.flink import rest
from tests.quick_jvm import QUICK_JVM

__all__ = ["StandaloneCluster", "standalone_cluster"]

FLINK_HOME = pathlib.Path(pyflink.__file__).parent
_TASK_MANAGER_CLASS = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
_SCRIPT_TIMEOUT_S = 120


def _configuration(folder: pathlib.Path, rest_port: int) -> dict[str, Any]:
    """The settings this test's cluster differs from the shipped ``config.yaml`` in.

    Not the interpreters nor the slots: the page's commands set those.
    """
    return {
        "jobmanager.rpc.port": rest.free_port(),
        "jobmanager.memory.process.size": "1024m",
        "taskmanager.memory.process.size": "1400m",
        "rest.address": "localhost",
        "rest.bind-address": "localhost",
        "rest.port": rest_port,
        "blob.server.port": str(rest.free_port()),
        # A killed TaskManager is noticed within seconds, not the default 50 s.
        "heartbeat.interval": 1_000,
        "heartbeat.timeout": 5_000,
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 30,
        "restart-strategy.fixed-delay.delay": "1 s",
        "execution.checkpointing.dir": (folder / "checkpoints").as_uri(),
        "execution.checkpointing.storage": "filesystem",
        "io.tmp.dirs": str(folder / "tmp"),
        # The REST API's metrics fetched from the TaskManagers every second, not every 10 s.
        "metrics.fetcher.update-interval": 1_000,
        "env.java.opts.jobmanager": QUICK_JVM,
        "env.java.opts.taskmanager": QUICK_JVM,
        "env.java.opts.client": QUICK_JVM,
    }


def _process_tree(root: int) -> list[int]:
    """``root`` and every process descended from it (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending += children.get(pid, [])
    return tree


def _pids_with(text: str) -> list[int]:
    """Processes whose command line contains ``text``."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                    found.append(int(entry.name))
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class StandaloneCluster:
    """A running standalone cluster: submit with ``flink run``, ask its REST API, kill workers."""

    def __init__(self, folder: pathlib.Path):
        self.folder = folder
        self.conf_dir = folder / "conf"
        self.rest_port = rest.free_port()
        self.env = {
            **os.environ,
            "FLINK_CONF_DIR": str(self.conf_dir),
            "FLINK_LOG_DIR": str(folder / "log"),
            "FLINK_PID_DIR": str(folder / "pids"),
        }

    def configure(self) -> None:
        """Writes the cluster's ``conf`` folder."""
        shutil.copytree(FLINK_HOME / "conf", self.conf_dir)
        for name in ("log", "pids", "tmp"):
            (self.folder / name).mkdir()
        path = self.conf_dir / "config.yaml"
        shipped = yaml.safe_load(path.read_text()) or {}
        # Flat keys beside the shipped nested ones: Flink reads both forms.
        flat = {**self._flattened(shipped), **_configuration(self.folder, self.rest_port)}
        path.write_text(yaml.safe_dump(flat))

    @staticmethod
    def _flattened(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for key, value in tree.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                flat.update(StandaloneCluster._flattened(value, name + "."))
            else:
                flat[name] = value
        return flat

    def shell(self, script: str, cwd: pathlib.Path) -> str:
        """Runs ``script`` (the page's commands) with bash and this cluster's settings."""
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=_SCRIPT_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            msg = f"{script}\nexited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
            raise AssertionError(msg)
        return done.stdout + done.stderr

    def rest(self, path: str) -> Any:
        """The JSON answer of the JobManager's REST API at ``path``."""
        url = f"http://localhost:{self.rest_port}{path}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)

    def task_managers(self) -> int:
        """How many TaskManagers are registered (0 while the REST API is not up)."""
        try:
            return int(self.rest("/overview")["taskmanagers"])
        except OSError:
            return 0

    @staticmethod
    def job_id(output: str) -> str:
        """The job id ``flink run`` printed in ``output``."""
        for line in output.splitlines():
            if "JobID" in line:
                return line.split()[-1]
        msg = f"flink run printed no job id:\n{output}"
        raise AssertionError(msg)

    def metric(self, job: str, vertex: str, name: str) -> list[int]:
        """Metric ``name`` of the task whose name starts with ``vertex``, a value per subtask."""
        return [int(value) for value in rest.metric(self.rest_port, job, vertex, name)]

    def checkpoints(self, job: str) -> dict[str, Any]:
        """The job's checkpoint statistics."""
        return self.rest(f"/jobs/{job}/checkpoints")

    def kill_task_manager(self) -> int:
        """Kills the TaskManager and its Python workers with SIGKILL; returns its pid."""
        [task_manager] = [p for p in _pids_with(_TASK_MANAGER_CLASS) if self._ours(p)]
        _kill(_process_tree(task_manager))
        return task_manager

    def _ours(self, pid: int) -> bool:
        with contextlib.suppress(OSError):
            return str(self.conf_dir) in pathlib.Path(f"/proc/{pid}/cmdline").read_text()
        return False

    def leftovers(self) -> list[int]:
        """The processes of this cluster still running, with their descendants."""
        roots = [p for p in _pids_with(str(self.conf_dir)) if p != os.getpid()]
        return sorted({pid for root in roots for pid in _process_tree(root)})


@contextlib.contextmanager
def standalone_cluster(folder: pathlib.Path) -> Iterator[StandaloneCluster]:
    """A standalone cluster's settings for the ``with`` block, which starts it; killed after."""
    folder.mkdir(parents=True)
    cluster = StandaloneCluster(folder)
    cluster.configure()
    try:
        yield cluster
    finally:
        _kill(cluster.leftovers())
