"""A data dir that cannot be used stops the server with one clear line, not a traceback."""

from __future__ import annotations

import pathlib
import subprocess
import sys


def _start(data_dir: pathlib.Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "connector.server", "--data-dir", str(data_dir)]
    return subprocess.run(
        [*command, "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60
    )


def test_a_data_dir_that_is_a_file_is_refused_in_one_line(tmp_path: pathlib.Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("not a directory")
    finished = _start(a_file)
    assert finished.returncode == 2
    assert "Traceback" not in finished.stderr
    assert finished.stderr.splitlines()[-1].endswith(
        f"data dir {str(a_file)!r} cannot be used: Not a directory"
    )


def test_a_data_dir_on_a_read_only_file_system_is_refused_in_one_line(
    read_only_disk: pathlib.Path,
) -> None:
    finished = _start(read_only_disk / "data")
    assert finished.returncode == 2
    assert "Traceback" not in finished.stderr
    assert finished.stderr.splitlines()[-1].endswith("cannot be used: Read-only file system")
