"""``examples/spark_reader.py``, the script a user copies, run by docs/spark.md's command.

The store is a server process with TLS and tokens (:mod:`tests.spark.secure_server`);
the page's command (docs/spark.md) gets its URI, the stream, the CA file and a read-only
token file (the test's own in place of the page's), reads what the
stream holds (``--available-now``) and prints each key's events in
event-time order.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.quick_jvm import spark_conf_dir
from tests.readme import DOCS, shell_block, shell_env

from .secure_server import event_json, start_secure_server

pytestmark = [pytest.mark.slow, pytest.mark.long]

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]
LINE = re.compile(r"^(\d+)  (\S+Z)  (\S+)  (\{.*\})(  late)?$")


def test_the_reader_example_prints_each_keys_events_in_order_from_a_secure_server(
    spawn_server: Callable[..., Any], tmp_path: pathlib.Path
) -> None:
    server = start_secure_server(spawn_server, tmp_path / "store")
    server.create_stream("iot/sensors", segments=2)
    keys = ["a", "b", "c"]
    written = server.write("iot/sensors", keys, range(5))
    server.wait_for_watermark_past_writes("iot/sensors")

    [command] = shell_block("python examples/spark_reader.py", DOCS / "spark.md")
    port = server.uri.rpartition(":")[2]
    places = {
        "localhost:7070": f"localhost:{port}",
        "pki/ca.pem": server.ca_file,
        "late.token": server.token_files["reader"],
    }
    for page_place, test_place in places.items():
        command = command.replace(page_place, test_place)
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=CHECKOUT,
        # The script's default checkpoint goes to TMPDIR; its JVM is quick to start.
        env=shell_env(TMPDIR=str(tmp_path), SPARK_CONF_DIR=str(spark_conf_dir(tmp_path / "conf"))),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr.replace("WARN ", ""), done.stderr[-3000:]
    printed = [LINE.match(line) for line in done.stdout.splitlines()]
    assert all(printed), done.stdout
    events = [(m.group(3), m.group(4), bool(m.group(5))) for m in printed if m]
    assert Counter((k, e) for k, e, _ in events) == Counter(
        (k, event_json(k, s)) for k, s in written
    )
    assert not any(late for _, _, late in events)
    for key in keys:
        assert [e for k, e, _ in events if k == key] == [event_json(key, s) for s in range(5)]
