"""``python -m connector.server``: starts, serves, and stops cleanly on a signal."""

from __future__ import annotations

import pathlib
import signal
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest

from connector._wire import MAX_READ_BYTES
from connector.client import StoreClient
from connector.server import main
from tests.conftest import new_stream_in
from tests.store import payloads


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_server_stops_with_exit_code_zero_on_a_signal_sent_right_after_it_listens(
    spawn_server: Callable[..., object], tmp_path: pathlib.Path, signum: signal.Signals
) -> None:
    server = spawn_server(tmp_path / "data")
    server.process.send_signal(signum)

    assert server.process.wait(timeout=20) == 0, server.log()
    log = server.log()
    assert f"serving {server.uri} from {tmp_path / 'data'}" in log
    assert f"received {signum.name}, stopping" in log
    assert f"stopped {server.uri}" in log


@pytest.mark.slow
def test_server_serves_until_sigterm_and_keeps_what_it_stored(
    spawn_server: Callable[..., object], tmp_path: pathlib.Path
) -> None:
    server = spawn_server(tmp_path / "data", "--max-event-size", "64")
    with StoreClient(server.uri, retry_timeout_s=5.0) as client:
        segment = f"{new_stream_in(client)}/0"
        client.append(segment, "w", 0, [b"kept"])
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=20) == 0, server.log()
    assert "stopped" in server.log()

    again = spawn_server(tmp_path / "data")
    with StoreClient(again.uri, retry_timeout_s=5.0) as client:
        assert payloads(client, segment) == [b"kept"]


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--idle-tick-after-ms", "-5", "--idle-tick-after-ms must be >= 0, got -5"),
        ("--polling-period-ms", "0", "--polling-period-ms must be > 0 or None, got 0"),
        ("--max-event-size", "0", "--max-event-size must be > 0, got 0"),
        (
            "--max-event-size",
            str(MAX_READ_BYTES + 1),
            f"--max-event-size must be <= {MAX_READ_BYTES} for the store to be served",
        ),
    ],
)
def test_a_refused_value_exits_with_a_usage_error_naming_the_flag(
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    value: str,
    expected: str,
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--data-dir", str(tmp_path / "data"), flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tidemark-server: error: {expected}")
    assert err.count("\n") == 1, f"one line, no usage block: {err!r}"
    assert not (tmp_path / "data").exists()


def _start_in(folder: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m connector.server --data-dir data ARGS`` run in ``folder``, to a refusal."""
    command = [sys.executable, "-m", "connector.server", "--data-dir", "data", *args]
    return subprocess.run(
        command, cwd=folder, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--tls-cert", "server.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-client-ca", "ca.pem"], "--tls-client-ca needs --tls-cert and --tls-key"),
        (["--listen", "0.0.0.0:0"], "refusing to listen on '0.0.0.0:0' without authentication"),
        (["--token-file", "missing.toml"], "missing.toml"),
        (["--pid-file", "no/such/dir/tidemark.pid"], "cannot write --pid-file"),
    ],
)
def test_a_start_the_server_refuses_is_one_line_without_the_usage_block(
    tmp_path: pathlib.Path, args: list[str], expected: str
) -> None:
    refused = _start_in(
        tmp_path, *args, *([] if "--listen" in args else ["--listen", "127.0.0.1:0"])
    )
    assert refused.returncode == 2
    lines = [line for line in refused.stderr.splitlines() if "error" in line.lower()]
    assert lines == [lines[0]] and lines[0].startswith("tidemark-server: error: "), refused.stderr
    assert expected in lines[0]
    assert "usage:" not in refused.stderr and "Traceback" not in refused.stderr


def test_a_port_in_use_is_one_line_on_stderr_and_leaves_no_data_dir_behind(
    tmp_path: pathlib.Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        refused = _start_in(tmp_path, "--listen", listen)
    assert refused.returncode == 2
    # Nothing before it: no gRPC log line of the failed bind, no store opened.
    error = f"tidemark-server: error: cannot listen on {listen!r}: the address is in use\n"
    assert refused.stderr == error
    assert not (tmp_path / "data").exists()


def test_a_bad_command_line_still_gets_the_usage(tmp_path: pathlib.Path) -> None:
    command = [sys.executable, "-m", "connector.server", "--data-dir", "d", "--frobnicate"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2
    assert refused.stderr.startswith("usage: tidemark-server")
    assert "unrecognized arguments: --frobnicate" in refused.stderr
