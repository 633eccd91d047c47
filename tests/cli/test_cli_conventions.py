"""What every ``tidemarkctl`` command shares, through its entry point.

Options after the command's name, errors in JSON, ``--version``,
``--if-(not-)exists``, Ctrl-C, tokens made without a traceback, health.
"""

from __future__ import annotations

import json
import os
import pathlib
import selectors
import signal
import subprocess
import sys

import click
from click.testing import CliRunner, Result

from connector.cli import cli
from connector.security import Need, Right, TokenTable
from connector.server import StoreServer

BIN = pathlib.Path(sys.executable).parent


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def leaf_commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += leaf_commands(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def test_every_command_takes_the_common_options_after_its_name() -> None:
    leaves = leaf_commands(cli)
    assert ("stream", "describe") in leaves and ("token", "create") in leaves
    for path in leaves:
        shown = run(*path, "--help")
        assert shown.exit_code == 0, (path, shown.output)
        for option in ("--uri", "-o, --output", "--json", "--timeout"):
            assert option in shown.stdout, f"{' '.join(path)} lacks {option}"


def test_json_after_the_command_name_and_errors_in_json_on_stderr(
    store_server: StoreServer,
) -> None:
    uri = store_server.uri
    assert run("scope", "create", "ops", "--uri", uri).exit_code == 0
    made = run("stream", "create", "ops/s", "--uri", uri, "-o", "json")
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["name"] == "ops/s"
    described = run("--uri", uri, "stream", "describe", "ops/s", "--json")
    assert json.loads(described.stdout)["segments"][0]["segment"] == "ops/s/0"

    for form in (["--json"], ["-o", "json"], ["--output=json"]):
        missing = run("stream", "describe", "ops/nope", "--uri", uri, *form)
        assert missing.exit_code == 3
        assert missing.stdout == ""
        assert json.loads(missing.stderr) == {
            "error": "stream ops/nope does not exist",
            "exit_code": 3,
            "kind": "NotFoundError",
        }
    bad_line = run("stream", "describe", "no-slash", "--json")
    assert bad_line.exit_code == 2
    error = json.loads(bad_line.stderr)
    assert error["kind"] == "UsageError" and "'no-slash'" in error["error"]
    unknown_option = run("stream", "describe", "ops/s", "--frobnicate", "-o", "json")
    assert unknown_option.exit_code == 2
    assert "--frobnicate" in json.loads(unknown_option.stderr)["error"]
    text = run("stream", "describe", "ops/nope", "--uri", uri)
    assert text.stderr == "tidemarkctl: error: stream ops/nope does not exist\n"


def test_version_through_the_installed_command() -> None:
    shown = subprocess.run(
        "tidemarkctl --version",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "tidemarkctl, version 0.1.0\n"


def test_if_not_exists_and_if_exists_make_repeats_harmless(store_server: StoreServer) -> None:
    uri = ("--uri", store_server.uri, "--json")
    assert json.loads(run("scope", "create", "ops", *uri).stdout) == {
        "scope": "ops",
        "created": True,
    }
    assert run("scope", "create", "ops", *uri).exit_code == 4
    again = run("scope", "create", "ops", "--if-not-exists", *uri)
    assert again.exit_code == 0 and json.loads(again.stdout)["created"] is False
    assert run("scope", "create", "ops", "--if-not-exists", "--uri", store_server.uri).stdout == (
        "scope ops exists already\n"
    )

    first = json.loads(run("stream", "create", "ops/s", "--segments", "2", *uri).stdout)
    assert first["created"] is True
    assert run("stream", "create", "ops/s", *uri).exit_code == 4
    kept = run("stream", "create", "ops/s", "--segments", "5", "--if-not-exists", *uri)
    assert kept.exit_code == 0
    assert json.loads(kept.stdout)["created"] is False
    assert len(json.loads(kept.stdout)["segments"]) == 2  # as it was, whatever --segments says

    assert run("stream", "delete", "ops/gone", *uri).exit_code == 3
    gone = run("stream", "delete", "ops/gone", "--if-exists", *uri)
    assert gone.exit_code == 0
    assert json.loads(gone.stdout) == {"deleted": "ops/gone", "existed": False}


def test_ctrl_c_ends_stream_tail_with_exit_0(store_server: StoreServer) -> None:
    uri = store_server.uri
    assert run("scope", "create", "ops", "--uri", uri).exit_code == 0
    assert run("stream", "create", "ops/s", "--uri", uri).exit_code == 0
    command = [str(BIN / "tidemarkctl"), "stream", "tail", "ops/s", "--uri", uri]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(30), "the tail printed nothing in 30 s"
        first = process.stdout.readline().decode()
        assert first.startswith("-- watermark ops/s/0 "), first  # it is following the tail
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr


def test_token_create_writes_the_token_and_prints_its_entry(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "ingest.token"
    made = run("token", "create", "ingest", "--grant", "iot=read,write", "--token-out", str(out))
    assert made.exit_code == 0, made.output
    (tmp_path / "tokens.toml").write_text(made.stdout)
    assert out.stat().st_mode & 0o777 == 0o600
    principal = TokenTable(tmp_path / "tokens.toml").principal(out.read_text().strip())
    assert principal is not None and principal.allows(Need(Right.WRITE, "iot"))
    assert not principal.allows(Need(Right.MANAGE, "iot"))

    again = run("token", "create", "ingest", "--grant", "iot=read", "--token-out", str(out))
    assert again.exit_code == 4
    assert again.stderr == (
        f"tidemarkctl: error: --token-out {str(out)!r} exists already: "
        "a token file is never overwritten\n"
    )
    bad = run("token", "create", "x", "--grant", "iot=fly", "--token-out", str(tmp_path / "x"))
    assert bad.exit_code == 2 and "'iot=fly'" in bad.stderr
    assert not (tmp_path / "x").exists()


def test_health_says_serving_and_an_unreachable_store_exits_6(store_server: StoreServer) -> None:
    serving = run("health", "--uri", store_server.uri)
    assert (serving.exit_code, serving.stdout) == (0, f"{store_server.uri}: SERVING\n")
    shown = json.loads(run("health", "--uri", store_server.uri, "--json").stdout)
    assert shown == {"status": "SERVING", "uri": store_server.uri}
    down = run("health", "--uri", "tidemark://127.0.0.1:1", "--timeout", "0.2")
    assert down.exit_code == 6 and "'tidemark://127.0.0.1:1'" in down.stderr
