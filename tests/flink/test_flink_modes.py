"""Where the source's Python runs, said by the job itself, and savepoints that cross modes.

Real PyFlink jobs on a mini-cluster: each function reports the mode it
actually runs in (``tidemark.pythonThreadMode`` over the REST API, and in
thread mode a line in the TaskManager's log, which the REST API serves); a
savepoint taken in thread mode restores in process mode with every event
read once (the other way round is the compatibility test's savepoint,
written in process mode by an earlier version).
"""

from __future__ import annotations

import json
import pathlib
from collections import Counter
from typing import Any

import pytest
from pyflink.java_gateway import get_gateway

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from flink_adapter.python_mode import PROCESS, THREAD
from tests.flink import rest
from tests.flink.compat_job import STREAM, add_job, source
from tests.flink.conftest import PYTHON_MODES, environment

pytestmark = [pytest.mark.slow, pytest.mark.long]

_SCOPE, _NAME = STREAM.split("/")
#: Flink's standard connector metrics (FLIP-33) each operator of the source reports.
_SOURCE_METRICS = ("currentFetchEventTimeLag", "currentEmitEventTimeLag", "watermarkLag")
_COORDINATOR_METRICS = ("pendingRecords", "watermarkLag")
#: The coordinator's figure by the glossary's name (beside the event time's and the watermarks).
_WATERMARK, _DELAY = "tidemark.processingTimeWatermark", "tidemark.processingTimeDelayMs"


@pytest.mark.parametrize("python_mode", PYTHON_MODES)
def test_each_function_says_which_mode_its_python_runs_in_beside_flinks_connector_metrics(
    python_mode: str, start_store: Any, tmp_path: pathlib.Path, wait_until: Any
) -> None:
    server = start_store()
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope(_SCOPE)
        StreamManager(client).create_stream(_SCOPE, _NAME, 2)
        with EventWriter(client, STREAM, JsonSerializer()) as writer:
            for seq in range(20):
                writer.write_event({"key": f"k{seq % 4}", "seq": seq, "ts": seq}, f"k{seq % 4}")
    port = rest.free_port()
    env = environment(python_mode, **{"rest.port": str(port), "rest.address": "127.0.0.1"})
    add_job(env, server.uri, str(tmp_path / "rows.jsonl"))
    job = env.execute_async("modes")
    job_id = str(job.get_job_id())
    expected = 1.0 if python_mode == THREAD else 0.0
    try:
        for operator, subtasks, standard in (
            ("Tidemark source: ", 2, _SOURCE_METRICS),
            ("Tidemark coordinator: ", 1, _COORDINATOR_METRICS),
        ):
            name = f"{operator}{STREAM}"
            for metric in standard:  # Flink's connector names (FLIP-33), as monitoring reads them
                wait_until(
                    lambda n=name, m=metric, s=subtasks: len(rest.metric(port, job_id, n, m)) == s,
                    timeout=120,
                    what=f"{name}'s {metric}",
                )
            wait_until(
                lambda n=name, s=subtasks: (
                    len(rest.metric(port, job_id, n, "tidemark.pythonThreadMode")) == s
                ),
                timeout=120,
                what=f"{name}'s mode metric",
            )
            assert (
                rest.metric(port, job_id, name, "tidemark.pythonThreadMode")
                == [expected] * subtasks
            )
        # The job's processing-time watermark (a time: it was looked at) and its delay (0 or
        # more: the store's clock is synthetic), as the store's metrics name them.
        coordinator = f"Tidemark coordinator: {STREAM}"
        wait_until(
            lambda: (
                [v > 1e12 for v in rest.metric(port, job_id, coordinator, _WATERMARK)] == [True]
            ),
            timeout=60,
            what="the coordinator's processing-time watermark",
        )
        assert len(rest.metric(port, job_id, coordinator, _DELAY)) == 1
        if python_mode == THREAD:
            [manager] = rest.get(port, "/taskmanagers")["taskmanagers"]

            def logged() -> str:
                with rest.urllib.request.urlopen(
                    f"http://localhost:{port}/taskmanagers/{manager['id']}/log", timeout=10
                ) as answer:
                    return answer.read().decode()

            line = f"Tidemark source: {STREAM} 1/2 (attempt 0) runs its Python in thread mode"
            wait_until(lambda: line in logged(), timeout=30, what="the mode in the log")
    finally:
        job.cancel().result()


def test_a_savepoint_taken_in_thread_mode_restores_in_process_mode_reading_each_event_once(
    start_store: Any, tmp_path: pathlib.Path, wait_until: Any
) -> None:
    server = start_store(max_watermark_lag_ms=0)
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope(_SCOPE)
        StreamManager(client).create_stream(_SCOPE, _NAME, 2)
    rows_file = tmp_path / "rows.jsonl"
    rows_file.touch()

    def rows() -> list[dict[str, Any]]:
        return [json.loads(line) for line in rows_file.read_text().splitlines()]

    def write(first: int, count: int) -> None:
        with (
            StoreClient(server.uri) as client,
            EventWriter(client, STREAM, JsonSerializer()) as writer,
        ):
            for seq in range(first, first + count):
                key = f"k{seq % 4}"
                writer.write_event({"key": key, "seq": seq, "ts": seq}, routing_key=key)

    write(0, 20)
    env = environment(THREAD)
    add_job(env, server.uri, str(rows_file))
    job = env.execute_async("thread mode, savepointed")
    wait_until(lambda: len(rows()) >= 20, timeout=120, what="the first 20 events")
    # PyFlink 2.3's JobClient.stop_with_savepoint calls a Java method that no longer exists.
    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    stopping = job._j_job_client.stopWithSavepoint(  # noqa: SLF001
        False, (tmp_path / "savepoints").as_uri(), canonical
    )
    savepoint = stopping.get()
    write(20, 20)

    env = environment(PROCESS, **{"execution.savepoint.path": savepoint})
    add_job(env, server.uri, str(rows_file))
    job = env.execute_async("process mode, restored")
    try:
        wait_until(lambda: len(rows()) >= 40, timeout=120, what="the 20 events after the savepoint")
    finally:
        job.cancel().result()
    seen = Counter(row["event"]["seq"] for row in rows())
    assert sorted(seen) == list(range(40)), "every event"
    assert [seq for seq, times in seen.items() if times > 1] == [], "none read again"
    assert source(server.uri).settings.uid_prefix == "compat-source"
