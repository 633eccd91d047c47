"""Making PyFlink's thread-mode RuntimeContext whole: the rules, without a JVM.

Stand-ins for PyFlink's embedded class (it asks the JVM's context for what
Flink 2 moved) and for that JVM context (Flink 2's: ``getTaskInfo()``,
``getGlobalJobParameters()``, no ``getIndexOfThisSubtask``). The real
classes, in a real mini-cluster, are in ``test_flink_user_functions.py``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from flink_adapter.runtime_context import EMBEDDED_MODULE, TASK_INFO_METHODS, install


class _TaskInfo:
    def getTaskName(self) -> str:  # noqa: N802 - the JVM's names
        return "user function"

    def getNumberOfParallelSubtasks(self) -> int:  # noqa: N802
        return 4

    def getMaxNumberOfParallelSubtasks(self) -> int:  # noqa: N802
        return 128

    def getIndexOfThisSubtask(self) -> int:  # noqa: N802
        return 2

    def getAttemptNumber(self) -> int:  # noqa: N802
        return 1

    def getTaskNameWithSubtasks(self) -> str:  # noqa: N802
        return "user function (3/4)#1"


class _Flink2Context:
    """The JVM's RuntimeContext as Flink 2 has it: the task's facts on ``getTaskInfo()``."""

    def getTaskInfo(self) -> _TaskInfo:  # noqa: N802
        return _TaskInfo()

    def getGlobalJobParameters(self) -> dict[str, str]:  # noqa: N802
        return {"user.threshold": "42", "NUM_PARTITIONS": "global"}


class _Flink118Context:
    """A JVM context from before ``getTaskInfo()``: PyFlink's own calls work there."""

    def getIndexOfThisSubtask(self) -> int:  # noqa: N802
        return 7


def _embedded_class() -> type:
    """PyFlink's thread-mode class as 2.3 writes it: each method asks the JVM's context."""

    def asks(java_name: str) -> Any:
        return lambda self: getattr(self._runtime_context, java_name)()

    methods = {name: asks(java) for name, java in TASK_INFO_METHODS.items()}

    def get_job_parameter(self: Any, key: str, default_value: str) -> Any:
        return self._job_parameters[key] if key in self._job_parameters else default_value

    def init(self: Any, context: Any, job_parameters: dict[str, str]) -> None:
        self._runtime_context, self._job_parameters = context, job_parameters

    return type(
        "StreamingRuntimeContext",
        (),
        {**methods, "get_job_parameter": get_job_parameter, "__init__": init},
    )


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> type:
    """A TaskManager's embedded interpreter: PyFlink's class loaded, not yet made whole."""
    module = types.ModuleType(EMBEDDED_MODULE)
    module.StreamingRuntimeContext = _embedded_class()
    monkeypatch.setitem(sys.modules, EMBEDDED_MODULE, module)
    return module.StreamingRuntimeContext


def test_outside_a_taskmanagers_interpreter_nothing_is_changed(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, EMBEDDED_MODULE, raising=False)
    assert install() is False
    assert EMBEDDED_MODULE not in sys.modules, "the class is not loaded for the fix"


def test_without_the_fix_flink_2_fails_each_task_method_as_pyflink_does(embedded) -> None:
    context = embedded(_Flink2Context(), {})
    for name in TASK_INFO_METHODS:
        with pytest.raises(AttributeError):
            getattr(context, name)()
    assert context.get_job_parameter("user.threshold", "unset") == "unset"


def test_each_task_method_answers_from_the_task_info(embedded) -> None:
    assert install() is True
    context = embedded(_Flink2Context(), {})
    assert context.get_task_name() == "user function"
    assert context.get_number_of_parallel_subtasks() == 4
    assert context.get_max_number_of_parallel_subtasks() == 128
    assert context.get_index_of_this_subtask() == 2
    assert context.get_attempt_number() == 1
    assert context.get_task_name_with_subtasks() == "user function (3/4)#1"


def test_a_job_parameter_is_pyflinks_own_then_the_jobs_global_one_then_the_default(
    embedded,
) -> None:
    install()
    context = embedded(_Flink2Context(), {"NUM_PARTITIONS": "3"})
    assert context.get_job_parameter("NUM_PARTITIONS", "none") == "3"
    assert context.get_job_parameter("user.threshold", "unset") == "42"
    assert context.get_job_parameter("user.absent", "default") == "default"


def test_a_flink_without_task_info_keeps_pyflinks_own_calls(embedded) -> None:
    install()
    context = embedded(_Flink118Context(), {})
    assert context.get_index_of_this_subtask() == 7
    assert context.get_job_parameter("user.threshold", "unset") == "unset"


def test_installing_again_wraps_nothing_twice(embedded) -> None:
    install()
    once = {name: getattr(embedded, name) for name in [*TASK_INFO_METHODS, "get_job_parameter"]}
    assert install() is True
    assert {name: getattr(embedded, name) for name in once} == once
