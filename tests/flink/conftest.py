"""PyFlink fixtures: a local execution environment per test (a mini-cluster in this JVM).

The source runs its Python in thread mode unless the job says otherwise:
``flink_env`` leaves the mode to the source; a test parametrized with
``@pytest.mark.parametrize("flink_env", PYTHON_MODES, indirect=True)`` runs
once in each mode, the job set to it as a user would.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

from flink_adapter.python_mode import MODE_KEY, MODES

#: Both Python execution modes, for tests that run in each.
PYTHON_MODES = list(MODES)


def environment(python_mode: str | None = None, **settings: str) -> Any:
    """A streaming environment at parallelism 2, in ``python_mode`` (None: the source's choice)."""
    configuration = Configuration()
    configuration.set_string("parallelism.default", "2")
    if python_mode is not None:
        configuration.set_string(MODE_KEY, python_mode)
    for key, value in settings.items():
        configuration.set_string(key, value)
    return StreamExecutionEnvironment.get_execution_environment(configuration)


@pytest.fixture
def flink_env(request: pytest.FixtureRequest) -> Any:
    """A streaming environment at parallelism 2 for one job (a mode when parametrized)."""
    return environment(getattr(request, "param", None))
