"""The README's quickstart, run as written: a server, a stream, readings, a windowed Spark query.

The quickstart's runnable blocks run in order in one bash, in a folder of the
test's own, where ``.venv-spark`` is this environment; the one place changed
is the port (7171 on the page, a free one here); Spark's JVM is quick to
start (:mod:`tests.quick_jvm`). What the query prints is
checked against the readings the quickstart stored, read back from its data
dir once its last command has stopped the server.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime

import pytest

from connector import StoreClient, embedded_store
from connector.framing import iter_frames
from tests.conftest import wait_until
from tests.docs.runnable import as_shell_script, runnable_blocks
from tests.quick_jvm import spark_conf_dir
from tests.readme import README, free_port, localized, shell_env

pytestmark = [pytest.mark.slow, pytest.mark.long]

#: A row of the console sink: |{window start, window end}|sensor|average|.
_ROW = re.compile(r"^\|\{(\S+ \S+), (\S+ \S+)\}\|([ABC])\s*\|([\d.]+)\s*\|$", flags=re.M)
_WINDOW_MS = 20_000


def _ms(text: str) -> int:
    """Epoch ms of a console timestamp (the session's time zone is UTC)."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def _stored_readings(data_dir: pathlib.Path) -> list[dict]:
    """Every reading of ``iot/sensors`` in the stopped quickstart's data dir."""
    with embedded_store(str(data_dir)) as uri, StoreClient(uri) as client:
        segments = [s.segment for s in client.describe_stream("iot", "sensors").segments]
        readings = []
        for segment in segments:
            read = client.read(segment, 0, max_bytes=1 << 20)
            readings += [json.loads(f.payload) for f in iter_frames(read.data, read.offset)]
    return readings


def _closed_window_averages(readings: list[dict]) -> dict[tuple[int, str], float]:
    """Each (window start, sensor) the watermark closed, and its average temperature.

    The writer's last assertion is the greatest event time less 1 ms; a window
    comes out once the watermark reaches its end.
    """
    watermark = max(r["ts"] for r in readings) - 1
    temps: dict[tuple[int, str], list[float]] = defaultdict(list)
    for r in readings:
        start = r["ts"] - r["ts"] % _WINDOW_MS
        if start + _WINDOW_MS <= watermark:
            temps[(start, r["sensor"])].append(r["temp"])
    return {key: sum(values) / len(values) for key, values in temps.items()}


def test_the_readme_quickstart_runs_as_written_and_prints_each_closed_window_once(
    tmp_path: pathlib.Path,
) -> None:
    blocks = runnable_blocks(README)
    assert [b.language for b in blocks] == ["sh", "python", "sh"]
    script = localized(as_shell_script(blocks), {"7171": str(free_port())})
    (tmp_path / ".venv-spark").symlink_to(sys.prefix)
    output = tmp_path / "output.txt"
    with output.open("w") as out:
        # Its own session: the quickstart's server runs in the background of that bash.
        run = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=tmp_path,
            env=shell_env(SPARK_CONF_DIR=str(spark_conf_dir(tmp_path / "spark-conf"))),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = run.wait(timeout=600)
        finally:
            try:
                os.killpg(run.pid, signal.SIGKILL)  # whatever of it is left, the server too
            except ProcessLookupError:
                pass
    printed = output.read_text()
    assert code == 0, printed[-4000:]

    pid_file = tmp_path / "quickstart.pid"
    wait_until(lambda: not pid_file.exists(), timeout=30, what="the server stopped by kill")
    expected = _closed_window_averages(_stored_readings(tmp_path / "quickstart-data"))
    shown = {
        (_ms(start), sensor): float(average)
        for start, end, sensor, average in _ROW.findall(printed)
        if _ms(end) - _ms(start) == _WINDOW_MS
    }
    assert len(_ROW.findall(printed)) == len(shown), "each window once"
    assert shown.keys() == expected.keys(), printed[-4000:]
    assert all(shown[k] == pytest.approx(expected[k]) for k in expected)
    assert {sensor for _, sensor in shown} == {"A", "B", "C"}

    assert "reader group iot/quickstart: streams iot/sensors" in printed
    assert "0 unread events" in printed
    assert "group iot/quickstart: watermark" in printed
