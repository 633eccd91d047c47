"""PyFlink 2.3's thread-mode ``RuntimeContext``, made to answer the task methods it documents.

In thread mode PyFlink hands every Python function (the user's as well as
the source's) a ``StreamingRuntimeContext`` of
``pyflink.fn_execution.datastream.embedded.runtime_context``, which asks the
JVM's ``RuntimeContext`` for ``getTaskName``, ``getIndexOfThisSubtask`` and
their kin. Flink 2.0 removed those from ``RuntimeContext`` for
``getTaskInfo()`` (FLIP-382), so each of them raises ``AttributeError:
'pemja.PyJObject' object has no attribute 'getIndexOfThisSubtask'``. And
its ``get_job_parameter`` sees none of the job's global parameters (the
JVM hands thread mode only PyFlink's internal ones), so it answers the
default for every parameter the job set. The rest of the class
(``get_metrics_group`` and the keyed state getters) works as it is.

:func:`install` makes the methods of :data:`TASK_INFO_METHODS` ask the
task's ``TaskInfo``, and ``get_job_parameter`` look in the job's global
parameters for a key PyFlink's own do not hold: the JVM's own answers, the
same process mode gives. It changes nothing else, and only in a
TaskManager's embedded interpreter, where PyFlink loads that class before
any function; elsewhere (the client, a process-mode worker) it does
nothing. Importing :mod:`flink_adapter` calls it, once per interpreter.

The fix is in place for a function once :mod:`flink_adapter` is imported
in its TaskManager. The source's functions import it as they load, but
Flink opens the operators of a job concurrently, and PyFlink offers no hook
that runs first: a function of the user's may be opened before them, or run
in a TaskManager without them. So a function that calls these methods in
thread mode imports :mod:`flink_adapter` first (``import flink_adapter`` at
the top of its ``open``); without that, PyFlink's ``AttributeError`` above
can still come, from the call in ``open``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["EMBEDDED_MODULE", "TASK_INFO_METHODS", "install"]

#: Where PyFlink keeps its thread-mode runtime context class.
EMBEDDED_MODULE = "pyflink.fn_execution.datastream.embedded.runtime_context"
#: PyFlink's ``RuntimeContext`` methods that Flink 2 answers on ``TaskInfo``, and its names there.
TASK_INFO_METHODS = {
    "get_task_name": "getTaskName",
    "get_number_of_parallel_subtasks": "getNumberOfParallelSubtasks",
    "get_max_number_of_parallel_subtasks": "getMaxNumberOfParallelSubtasks",
    "get_index_of_this_subtask": "getIndexOfThisSubtask",
    "get_attempt_number": "getAttemptNumber",
    "get_task_name_with_subtasks": "getTaskNameWithSubtasks",
}
_MARK = "_tidemark_task_info"


def install() -> bool:
    """Makes PyFlink's thread-mode runtime context answer :data:`TASK_INFO_METHODS` and parameters.

    Returns whether it is in place: False outside a TaskManager's embedded
    interpreter (the client, a process-mode worker), where the class is not
    loaded and nothing is changed. Calling it again changes nothing more.
    """
    module = sys.modules.get(EMBEDDED_MODULE)
    if module is None:
        return False
    cls = module.StreamingRuntimeContext
    if not getattr(cls, _MARK, False):
        for name, java_name in TASK_INFO_METHODS.items():
            setattr(cls, name, _from_task_info(getattr(cls, name), java_name))
        cls.get_job_parameter = _with_global_parameters(cls.get_job_parameter)
        setattr(cls, _MARK, True)
    return True


def _from_task_info(pyflink_method: Callable[[Any], Any], java_name: str) -> Callable[[Any], Any]:
    """``pyflink_method`` answered by the JVM context's ``getTaskInfo().<java_name>()``.

    A Flink without ``getTaskInfo`` (before 1.19) keeps PyFlink's own call.
    """

    @functools.wraps(pyflink_method)
    def method(self: Any) -> Any:
        task_info = getattr(self._runtime_context, "getTaskInfo", None)
        if task_info is None:
            return pyflink_method(self)
        return getattr(task_info(), java_name)()

    return method


def _with_global_parameters(pyflink_method: Callable[..., Any]) -> Callable[..., Any]:
    """``get_job_parameter`` that also finds the job's global parameters, as process mode does.

    PyFlink's own parameters (internal ones) first, then the JVM context's
    ``getGlobalJobParameters()``, then ``default_value``.
    """

    @functools.wraps(pyflink_method)
    def get_job_parameter(self: Any, key: str, default_value: str) -> Any:
        value = pyflink_method(self, key, None)
        if value is None:
            parameters = getattr(self._runtime_context, "getGlobalJobParameters", None)
            value = None if parameters is None else parameters().get(key)
        return default_value if value is None else value

    return get_job_parameter
