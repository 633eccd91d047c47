"""A Spark standalone cluster started by docs/spark.md's commands, as written, for one test.

The Spark page's block "Running on a Spark cluster" starts a master and two
workers with the ``spark-daemon.sh`` the PySpark package ships, submits
``examples/spark_reader.py`` with ``spark-submit`` and stops the daemons.
:class:`ReadmeCluster` runs those commands through bash, with only the
page's fixed places swapped for the test's own (free ports, the test's
store, its files and folders); the environment adds where the daemons keep
their logs, pid files and executors' work (``SPARK_LOG_DIR``,
``SPARK_PID_DIR``, ``SPARK_WORKER_DIR``), binds them to loopback
(``SPARK_LOCAL_IP``), and gives the job's web UI a free port (a
``spark-defaults.conf`` in ``SPARK_CONF_DIR``), whose REST API says which
executor runs tasks now; every JVM of it, daemons, driver and executors, is
quick to start (:mod:`tests.quick_jvm`). Afterwards it stops the job and the
daemons, and kills whatever of them is still running (only processes it
started).
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

from tests.conftest import wait_until
from tests.quick_jvm import QUICK_JVM, spark_conf_dir
from tests.readme import DOCS, free_port, shell_block, shell_env

__all__ = ["ReadmeCluster", "descendants", "free_port"]

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]
_BLOCK = "org.apache.spark.deploy.master.Master 1"
_STOP_TIMEOUT_S = 60


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (children, their children...), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_line(pid: int) -> str:
    """The command line of ``pid`` (empty once it is gone)."""
    try:
        raw = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


class ReadmeCluster:
    """The page's cluster commands, run in ``folder`` with the test's ``places``."""

    def __init__(self, folder: pathlib.Path, places: Mapping[str, str]):
        self.folder = folder
        self.master_port = free_port()
        self.web_port = free_port()
        self.places = {"7077": str(self.master_port), "8080": str(self.web_port), **places}
        commands = [self._localized(c) for c in shell_block(_BLOCK, DOCS / "spark.md")]
        self.exports = [c for c in commands if c.startswith("export ")]
        self.starts = [c for c in commands if "spark-daemon.sh start" in c]
        [self.submit_command] = [c for c in commands if "spark-submit" in c]
        self.stops = [c for c in commands if "spark-daemon.sh stop" in c]
        assert len(self.exports) + len(self.starts) + len(self.stops) + 1 == len(commands)
        self.ui_port = free_port()
        conf = spark_conf_dir(folder / "conf", {"spark.ui.port": str(self.ui_port)})
        self.env = shell_env(
            SPARK_CONF_DIR=str(conf),
            SPARK_LOG_DIR=str(folder / "logs"),
            SPARK_PID_DIR=str(folder / "pids"),
            SPARK_WORKER_DIR=str(folder / "work"),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
        )
        self.job: subprocess.Popen[bytes] | None = None
        self.job_log = folder / "job.log"

    def _localized(self, command: str) -> str:
        for page_place, test_place in self.places.items():
            command = command.replace(page_place, test_place)
        return command

    def _run(self, commands: list[str]) -> None:
        script = "\n".join(["set -e", *self.exports, *commands])
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=CHECKOUT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{commands!r} failed: {done.stdout}{done.stderr}"

    def start(self) -> None:
        """Starts the master and the workers; returns once both workers have registered."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._run(self.starts)
        wait_until(
            lambda: self.status().get("aliveworkers") == 2,
            timeout=120,
            interval=0.5,
            what="two workers registered with the master",
        )

    def status(self) -> dict[str, Any]:
        """The master's state, from its web UI's JSON ({} while it does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=5) as r:
                return dict(json.load(r))
        except OSError:
            return {}

    def submit(self) -> None:
        """Runs the page's ``spark-submit`` command in the background (its own session)."""
        script = "\n".join([*self.exports, self.submit_command])
        with open(self.job_log, "wb") as log:
            self.job = subprocess.Popen(
                ["bash", "-c", script],
                cwd=CHECKOUT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def busy_executor(self) -> int | None:
        """The pid of an executor running a task now, from the job's REST API (None: none)."""
        base = f"http://127.0.0.1:{self.ui_port}/api/v1/applications"
        try:
            with urllib.request.urlopen(base, timeout=5) as answer:
                [app] = json.load(answer)
            with urllib.request.urlopen(f"{base}/{app['id']}/executors", timeout=5) as answer:
                states = json.load(answer)
        except (OSError, ValueError):
            return None
        busy = {e["id"] for e in states if e["id"] != "driver" and e["activeTasks"] > 0}
        for pid in self.executors():
            words = command_line(pid).split()
            if "--executor-id" in words and words[words.index("--executor-id") + 1] in busy:
                return pid
        return None

    def daemon_pids(self, kind: str) -> list[int]:
        """The pids of the running daemons of ``kind`` (``Worker``, ``Master``)."""
        pids = []
        for path in (self.folder / "pids").glob(f"*deploy.{kind.lower()}.{kind}-*.pid"):
            pid = int(path.read_text().strip())
            if command_line(pid):
                pids.append(pid)
        return pids

    def executors(self) -> list[int]:
        """The executor processes the workers run now."""
        return [
            pid
            for worker in self.daemon_pids("Worker")
            for pid in descendants(worker)
            if "CoarseGrainedExecutorBackend" in command_line(pid)
        ]

    def stop(self) -> None:
        """Stops the job (as Ctrl-C does), runs the page's stop commands, kills leftovers."""
        started = [p for kind in ("Worker", "Master") for p in self.daemon_pids(kind)]
        everything = started + [d for p in started for d in descendants(p)]
        if self.job is not None:
            everything += descendants(self.job.pid)
            if self.job.poll() is None:
                os.killpg(self.job.pid, signal.SIGINT)
                try:
                    self.job.wait(timeout=_STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.killpg(self.job.pid, signal.SIGKILL)
                    self.job.wait(timeout=10)
        try:
            self._run(self.stops)
        finally:
            deadline = time.monotonic() + 10
            for pid in everything:
                while command_line(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if command_line(pid):
                    os.kill(pid, signal.SIGKILL)

    def log(self) -> str:
        """What the job printed so far."""
        return self.job_log.read_text(errors="replace") if self.job_log.exists() else ""
