"""The commands of docs/operating.md for running a server, run as written through a shell."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from tests.conftest import _read_listening_line
from tests.readme import DOCS, localized, shell, shell_block, shell_env

PAGE = DOCS / "operating.md"

pytestmark = pytest.mark.slow


def test_start_health_and_stop_as_the_readme_writes_them(tmp_path: pathlib.Path) -> None:
    start, health, stop = shell_block("kill -TERM", PAGE)
    pid_file = tmp_path / "tidemark.pid"
    places = {
        "/var/lib/tidemark": str(tmp_path / "data"),
        "127.0.0.1:7070": "127.0.0.1:0",
        "127.0.0.1:9464": "127.0.0.1:0",
        "/run/tidemark.pid": str(pid_file),
    }
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        ["bash", "-c", localized(start, places)],
        cwd=tmp_path,
        env=shell_env(),
        stdout=subprocess.PIPE,
        stderr=log,
    )
    try:
        address = _read_listening_line(server, timeout=30)
        pid = int(pid_file.read_text())
        assert "tidemark-server" in pathlib.Path(f"/proc/{pid}/cmdline").read_text()
        # What the documentation used to say: pidof does not know a script by its name.
        assert str(pid) not in shell("pidof -s tidemark-server", tmp_path).stdout.split()

        checked = shell(health, tmp_path, TIDEMARK_URI=f"tidemark://{address}")
        assert (checked.returncode, checked.stdout) == (0, f"tidemark://{address}: SERVING\n")

        stopped = shell(localized(stop, {"/run/tidemark.pid": str(pid_file)}), tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert server.wait(timeout=30) == 0
        assert not pid_file.exists(), "the pid file goes when the server stops"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
        log.close()
        assert server.stdout is not None
        server.stdout.close()
    assert "stopped tidemark://" in (tmp_path / "server.log").read_text()


def test_every_tidemarkctl_command_of_the_readme_runs_as_written_in_its_order(
    tmp_path: pathlib.Path, spawn_server
) -> None:
    server = spawn_server(tmp_path / "data")
    commands = shell_block("tidemarkctl readergroup delete iot/dashboard", PAGE)
    readings = [json.dumps({"sensor": "ABC"[n % 3], "seq": n}) for n in range(12)]
    (tmp_path / "readings.jsonl").write_text("\n".join(readings) + "\n")
    outputs = {}
    for command in commands:
        # The plot samples for a minute on the page; a second shows the same here.
        here = command.replace("--duration 60", "--duration 1")
        done = shell(here, tmp_path, TIDEMARK_URI=server.uri)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        outputs[command.split("#")[0].strip()] = done.stdout
    assert (
        "wrote 12 events to iot/sensors"
        in outputs["tidemarkctl stream write iot/sensors --key-field sensor < readings.jsonl"]
    )
    tailed = outputs["tidemarkctl stream tail iot/sensors --from-start --max-events 10"]
    assert sum('"seq"' in line for line in tailed.splitlines()) == 10
    assert "12 unread events" in outputs["tidemarkctl readergroup describe iot/dashboard"]
    assert "held at" in outputs["tidemarkctl watermarks --why iot/dashboard"]
    assert (tmp_path / "wm.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "NAME.token").exists() and (tmp_path / "pki" / "ca.pem").exists()
    assert outputs["tidemarkctl --version"] == "tidemarkctl, version 0.1.0\n"
