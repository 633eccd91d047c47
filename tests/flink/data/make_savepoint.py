"""Writes the fixture of ``tests/flink/test_flink_compat.py``: a job's savepoint and its store.

Not run by the tests: it made ``savepoint_9325655/`` once, with the code of
commit 9325655 (main when the source package of issue 26 was begun), so the
test restores today's source from a savepoint the earlier one wrote::

    PYTHONPATH=. .venv-flink/bin/python tests/flink/data/make_savepoint.py \
        tests/flink/data/savepoint_9325655

On a store with a synthetic clock: stream ``compat/events`` of 2 segments,
6 events, segment 0 split into 2 and 3, 6 more events, idle ticks; the job
of ``tests/flink/compat_job.py`` reads them all, then stops with a savepoint;
then 6 events more, which the job never saw. ``written.json`` names the
events of both parts (``read``, ``unread``).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import tempfile
import time

from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.server import StoreServer
from connector.store import StoreConfig
from tests.flink.compat_job import add_job

CLOCK_START_MS = 1_700_000_000_000
#: Two routing keys in each of segments 2 and 3 (the halves of 0) and in segment 1.
KEYS = ["k13", "k7", "k2", "k11", "k0", "k4"]


def main(target: pathlib.Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    clock = ManualClock(CLOCK_START_MS)
    config = StoreConfig(
        data_dir=str(target / "store"), clock=clock, polling_period_ms=None, max_watermark_lag_ms=0
    )
    server = StoreServer(config, listen="127.0.0.1:0").start()
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("compat")
    StreamManager(client).create_stream("compat", "events", segment_count=2)

    def write(seq: int) -> list[dict[str, object]]:
        events = [{"key": key, "seq": seq, "ts": clock.now_ms()} for key in KEYS]
        with EventWriter(client, "compat/events", JsonSerializer()) as writer:
            for event in events:
                writer.write_event(event, routing_key=str(event["key"]))
        clock.advance(50)
        server.store.advance_idle_segments()
        return events

    read = write(0)
    client.scale_stream("compat", "events", [0], split_count=2)
    read += write(1)
    clock.advance(1_000)
    server.store.advance_idle_segments()

    with tempfile.TemporaryDirectory() as scratch:
        rows = pathlib.Path(scratch) / "rows.jsonl"
        rows.touch()
        configuration = Configuration()
        configuration.set_string("parallelism.default", "2")
        env = StreamExecutionEnvironment.get_execution_environment(configuration)
        add_job(env, server.uri, str(rows))
        job = env.execute_async("compat")
        deadline = time.monotonic() + 120
        while len(rows.read_text().splitlines()) < len(read):
            if time.monotonic() > deadline:
                msg = f"the job read {rows.read_text()!r} of {len(read)} events"
                raise SystemExit(msg)
            time.sleep(0.2)
        # PyFlink 2.3's JobClient.stop_with_savepoint calls a Java method that no longer exists.
        canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
        stopping = job._j_job_client.stopWithSavepoint(  # noqa: SLF001
            False, (pathlib.Path(scratch) / "sp").as_uri(), canonical
        )
        saved = stopping.get()
        shutil.copytree(saved.removeprefix("file:"), target / "savepoint")

    unread = write(2)
    (target / "written.json").write_text(json.dumps({"read": read, "unread": unread}, indent=1))
    client.close()
    server.stop()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
