"""PyFlink fixtures: a local execution environment per test (a mini-cluster in this JVM)."""

from __future__ import annotations

from typing import Any

import pytest
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment


@pytest.fixture
def flink_env() -> Any:
    """A streaming environment at parallelism 2 for one job."""
    configuration = Configuration()
    configuration.set_string("parallelism.default", "2")
    return StreamExecutionEnvironment.get_execution_environment(configuration)
