"""A job restored from a savepoint that an earlier version of the source wrote.

``data/savepoint_9325655/`` holds a store's data dir and a savepoint of the
job of :mod:`tests.flink.compat_job`, both written by the code of commit
9325655 with ``data/make_savepoint.py`` (its docstring says how; the tests
do not run it): a stream of 2 segments whose segment 0 was split, 12 events
the job read before it stopped with the savepoint, 6 it never saw. Today's
source, restored from that savepoint over that data, must read each of the
6 once and none of the 12.
"""

from __future__ import annotations

import json
import pathlib
import shutil
from collections import Counter
from typing import Any

import pytest
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

from connector import EventWriter, JsonSerializer, StoreClient
from tests.flink.compat_job import STREAM, add_job

pytestmark = pytest.mark.slow

FIXTURE = pathlib.Path(__file__).parent / "data" / "savepoint_9325655"
#: One routing key for each open segment (1, 2 and 3): a last event read after the rest.
SENTINEL_KEYS = ["k0", "k13", "k2"]


def test_a_job_restored_from_an_earlier_versions_savepoint_reads_each_new_event_once(
    start_store: Any, tmp_path: pathlib.Path, wait_until: Any
) -> None:
    shutil.copytree(FIXTURE / "store", tmp_path / "store")
    shutil.copytree(FIXTURE / "savepoint", tmp_path / "savepoint")
    written = json.loads((FIXTURE / "written.json").read_text())
    server = start_store(data_dir=str(tmp_path / "store"), max_watermark_lag_ms=0)
    rows_file = tmp_path / "rows.jsonl"
    rows_file.touch()

    configuration = Configuration()
    configuration.set_string("parallelism.default", "2")
    configuration.set_string("execution.savepoint.path", (tmp_path / "savepoint").as_uri())
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    add_job(env, server.uri, str(rows_file))
    job = env.execute_async("compat restored")
    try:
        with (
            StoreClient(server.uri) as client,
            EventWriter(client, STREAM, JsonSerializer()) as writer,
        ):
            for key in SENTINEL_KEYS:  # after the 6 unread ones in every segment's order
                sentinel = {"key": key, "seq": "end", "ts": written["unread"][0]["ts"] + 1_000}
                writer.write_event(sentinel, routing_key=key)

        def rows() -> list[dict[str, Any]]:
            return [json.loads(line) for line in rows_file.read_text().splitlines()]

        wait_until(
            lambda: sum(r["event"]["seq"] == "end" for r in rows()) == len(SENTINEL_KEYS),
            timeout=120,
            what="the last events written, in every segment",
        )
    finally:
        job.cancel().result()
    events = [r["event"] for r in rows() if r["event"]["seq"] != "end"]
    assert Counter(map(_key_seq, events)) == Counter(map(_key_seq, written["unread"]))
    assert not any(r["late"] for r in rows()), "no event is late after the restore"


def _key_seq(event: dict[str, Any]) -> tuple[str, int]:
    return event["key"], event["seq"]
