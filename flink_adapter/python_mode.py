"""Where the source's Python runs: PyFlink's thread mode or its process mode, and checking it.

PyFlink runs a job's Python functions in one of two ways (``python.execution-mode``):

- **thread** (FLIP-206, on pemja): inside the TaskManager's JVM, in an
  embedded interpreter, with no serialization between the JVM and Python
  and no process hop; every Python function of a TaskManager shares its
  one interpreter lock;
- **process**: in Python worker processes beside the TaskManager (on a
  local mini-cluster PyFlink's "loopback" runs them in the client process).

The mode is the job's: PyFlink hands every Python operator of a job the
job's setting when the job is submitted, so one job cannot mix modes, and
the mode decides how the user's own functions run too. So the source leaves
it as the job has it (PyFlink's default is process mode) and sets it only
when asked (:func:`configure_job`). In thread mode PyFlink 2.3's
``RuntimeContext`` needs :mod:`flink_adapter.runtime_context` for its task
methods. PyFlink falls back to process mode where thread mode is not
supported, without saying so, so the source checks where each of its
functions runs (:func:`mode_of`) and says it (:func:`report_mode`: the
TaskManager's log and a metric).

Thread mode needs two settings PyFlink does not make by itself:
``python.executable`` (PyFlink's default is ``python`` on the PATH, which
pemja asks where libpython is) and ``python.pythonpath`` (the embedded
interpreter starts from the base Python, without a virtual environment's
site-packages). :func:`configure_job` sets both for a local run; a cluster
sets them in its configuration (see the README).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MODES",
    "PROCESS",
    "THREAD",
    "Subtask",
    "configure_job",
    "job_log",
    "local_python_path",
    "mode_of",
    "report_mode",
    "subtask_of",
]

_log = logging.getLogger("flink_adapter")

#: PyFlink's thread mode: Python inside the TaskManager's JVM (pemja).
THREAD = "thread"
#: PyFlink's process mode: Python in worker processes (loopback on a local mini-cluster).
PROCESS = "process"
#: The modes, as ``python.execution-mode`` spells them.
MODES = (THREAD, PROCESS)

MODE_KEY = "python.execution-mode"
EXECUTABLE_KEY = "python.executable"
PATH_KEY = "python.pythonpath"
#: The packages the source's functions import on the TaskManagers.
_PACKAGES = ("connector", "flink_adapter")


def local_python_path() -> str:
    """What ``python.pythonpath`` must hold for thread mode to import this environment's modules.

    The folders this package and the reader core are imported from (an
    editable install puts them on no path: its import hook lives in a
    ``.pth`` file, which only ``site`` reads, and only for the base
    Python's site-packages in an embedded interpreter), then this
    interpreter's path: its virtual environment's site-packages and the
    job's own folders.
    """
    folders: list[str] = []
    for package in _PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            folders.append(os.path.dirname(os.path.dirname(spec.origin)))
    folders += [entry for entry in sys.path if entry]
    unique = dict.fromkeys(os.path.abspath(f) for f in folders if os.path.isdir(f))
    return os.pathsep.join(unique)


def configure_job(env: Any, mode: str | None) -> str:
    """Sets the Python execution mode of ``env``'s job if ``mode`` asks; returns the job's mode.

    ``mode`` None leaves the job's own ``python.execution-mode`` (set in its
    configuration or the cluster's) as it is, and returns it, or
    :data:`PROCESS`, PyFlink's default, when the job has none. A mode given
    is set. In thread mode on a local mini-cluster it also sets
    ``python.executable`` (this interpreter) and ``python.pythonpath``
    (:func:`local_python_path`), each only when the job has none; a cluster
    takes both from its configuration.
    """
    from pyflink.util.java_utils import get_j_env_configuration, is_local_deployment

    config = get_j_env_configuration(env._j_stream_execution_environment)
    if mode is None:
        configured = config.getString(MODE_KEY, None) if config.containsKey(MODE_KEY) else None
        mode = str(configured).lower() if configured else PROCESS
    else:
        config.setString(MODE_KEY, mode)
    if mode == THREAD and is_local_deployment(config):
        for key, value in ((EXECUTABLE_KEY, sys.executable), (PATH_KEY, local_python_path())):
            if not config.containsKey(key):
                config.setString(key, value)
    return mode


def mode_of(runtime_context: Any) -> str:
    """The mode the function given ``runtime_context`` (in its ``open``) actually runs in."""
    return THREAD if ".embedded." in f"{type(runtime_context).__module__}." else PROCESS


@dataclass(frozen=True)
class Subtask:
    """Which parallel instance a function is: its index, of how many, and which attempt."""

    index: int
    parallelism: int
    attempt: int

    def __str__(self) -> str:
        return f"{self.index + 1}/{self.parallelism} (attempt {self.attempt})"


def subtask_of(runtime_context: Any) -> Subtask:
    """The index, parallelism and attempt of the subtask given ``runtime_context``, in either mode.

    PyFlink's own methods, which answer in thread mode too once
    :mod:`flink_adapter` is imported (:mod:`flink_adapter.runtime_context`).
    """
    return Subtask(
        runtime_context.get_index_of_this_subtask(),
        runtime_context.get_number_of_parallel_subtasks(),
        runtime_context.get_attempt_number(),
    )


def job_log(runtime_context: Any, level: int, message: str) -> None:
    """Writes ``message`` to the TaskManager's log, from either mode.

    In process mode PyFlink sends a worker's Python logging to the
    TaskManager; in thread mode nothing does, so the message goes to the
    JVM's own logger (``flink_adapter``) through pemja.
    """
    if mode_of(runtime_context) == THREAD:
        from pemja import findClass

        logger = findClass("org.slf4j.LoggerFactory").getLogger("flink_adapter")
        # The two-argument form: pemja resolves a one-argument call to the varargs overload.
        (logger.warn if level >= logging.WARNING else logger.info)("{}", message)
        return
    _log.log(level, message)


def report_mode(runtime_context: Any, function: str, requested: str) -> str:
    """Logs where ``function`` runs and returns that mode; a warning when not ``requested``."""
    mode = mode_of(runtime_context)
    subtask = subtask_of(runtime_context)
    message = f"{function} {subtask} runs its Python in {mode} mode"
    if mode != requested:
        message += (
            f", not the {requested} mode the source asked for "
            f"(PyFlink fell back: {MODE_KEY} or pemja is missing where it runs)"
        )
    job_log(runtime_context, logging.WARNING if mode != requested else logging.INFO, message)
    return mode
