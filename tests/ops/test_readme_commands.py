"""The README's commands for operating a server, run as written through a shell."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from tests.conftest import _read_listening_line
from tests.readme import localized, shell, shell_block, shell_env

pytestmark = pytest.mark.slow


def test_start_health_and_stop_as_the_readme_writes_them(tmp_path: pathlib.Path) -> None:
    start, health, stop = shell_block("kill -TERM")
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
        # What the README used to say: pidof does not know a script by its name.
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
