"""A user's own keyed function beside the Tidemark source runs as in a job without it.

One job per Python execution mode on a mini-cluster over a real store: the
user's ``KeyedProcessFunction`` (:mod:`tests.flink.user_function`, shipped by
value as a job script's classes are, so nothing of Tidemark's is imported for
it) calls every method PyFlink documents on ``RuntimeContext``, keeps each
kind of keyed state and sets an event-time timer per row. The job left alone
runs where PyFlink runs it by default (process mode); asked for thread mode,
it runs there, and the user's function works the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest
from pyflink.common import Types

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from flink_adapter import FlinkTidemarkReader
from flink_adapter.python_mode import PROCESS, THREAD
from tests.flink import user_function
from tests.flink.conftest import environment

pytestmark = pytest.mark.slow

_KEYS = ("a", "b", "c")
_EVENTS = 12


@pytest.fixture
def shipped_by_value() -> Iterator[None]:
    """The user's function travels as a job script's does: its code, not an import of it."""
    cloudpickle.register_pickle_by_value(user_function)
    yield
    cloudpickle.unregister_pickle_by_value(user_function)


@pytest.mark.usefixtures("shipped_by_value")
@pytest.mark.parametrize("asked", [None, THREAD], ids=["job-left-alone", "thread-asked"])
def test_a_users_keyed_function_gets_every_runtime_context_method_state_and_timers(
    asked: str | None, start_store: Any, clock: Any
) -> None:
    server = start_store()
    written: dict[str, list[int]] = {key: [] for key in _KEYS}
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("u")
        StreamManager(client).create_stream("u", "s", 2)
        with EventWriter(client, "u/s", JsonSerializer()) as writer:
            for n in range(_EVENTS):
                key = _KEYS[n % len(_KEYS)]
                writer.write_event({"n": n}, routing_key=key)
                writer.flush()
                written[key].append(n)
                clock.advance(1)  # a distinct event time (ingestion time) per event
    builder = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("u/s", start="earliest", end="latest")
        .with_deserialization_schema("json")
    )
    if asked is not None:
        builder = builder.with_python_execution_mode(asked)
    env = environment()
    env.get_config().set_global_job_parameters(
        {user_function.PARAMETER: user_function.PARAMETER_VALUE}
    )
    rows = builder.build().create_stream(env)
    fired = (
        rows.key_by(lambda row: row[0], key_type=Types.STRING())
        .process(
            user_function.EveryContextMethod()
            if asked is None
            else user_function.EveryContextMethodInThreadMode(),
            output_type=Types.STRING(),
        )
        .name("user function")
    )
    with fired.execute_and_collect() as results:
        timers = [json.loads(row) for row in results]

    mode = asked or PROCESS  # PyFlink's own default: the source no longer changes it
    embedded = ".embedded." in timers[0]["context"]["class"]
    assert embedded == (mode == THREAD), timers[0]["context"]["class"]
    event_times = {(t["key"], time) for t in timers for time in t["times"].values()}
    assert sorted((t["key"], t["timer"]) for t in timers) == sorted(event_times), (
        "one timer per event, each fired once"
    )
    assert len(timers) == _EVENTS
    for timer in timers:
        context = timer["context"]
        assert context["parallelism"] == 2
        assert context["index"] in (0, 1)
        assert context["attempt"] == 0
        assert context["max_parallelism"] == 128
        assert "user function" in context["task_name"]
        assert context["task_name_with_subtasks"].startswith(
            f"{context['task_name']} ({context['index'] + 1}/2)"
        )
        assert context["parameter"] == user_function.PARAMETER_VALUE
        assert context["absent_parameter"] == "default"
        mine = written[timer["key"]]
        # Every timer fires at the end of the bounded read, after every row of its key.
        assert timer["count"] == len(mine)
        assert timer["seen"] == mine
        assert sorted(map(int, timer["times"])) == mine
        assert timer["total"] == sum(mine)
        assert timer["largest"] == max(mine)
