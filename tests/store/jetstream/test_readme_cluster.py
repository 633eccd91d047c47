"""docs/cluster.md's commands for a JetStream cluster on one machine, run as written by a shell."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from connector.client import StoreClient, StreamManager
from tests.conftest import _read_listening_line
from tests.readme import DOCS, ROOT, localized, shell, shell_block, shell_env

pytestmark = pytest.mark.slow


def test_make_cluster_up_a_server_on_it_and_cluster_down_as_the_readme_writes_them(
    tmp_path: pathlib.Path,
) -> None:
    up, serve, down = shell_block("make cluster-up", DOCS / "cluster.md")
    repository = ROOT
    where = {"CLUSTER_DIR": str(tmp_path / "cluster")}  # not the checkout's own .nats-cluster
    server: subprocess.Popen[bytes] | None = None
    try:
        started = shell(up, repository, **where)
        assert started.returncode == 0, started.stderr
        urls = started.stdout.strip().splitlines()[-1].split(",")
        assert len(urls) == 3 and all(url.startswith("nats://127.0.0.1:") for url in urls)
        server = subprocess.Popen(
            ["bash", "-c", localized(serve, {"127.0.0.1:7070": "127.0.0.1:0"})],
            cwd=repository,
            env=shell_env(**where),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        address = _read_listening_line(server, timeout=60)
        with StoreClient(f"tidemark://{address}") as client:
            StreamManager(client).create_scope("readme")
            written = client.append(
                client.create_stream("readme", "s", 1).segments[0].segment, "w", 0, [b"x"]
            )
            assert written.appended == 1
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
            assert server.stdout is not None
            server.stdout.close()
        stopped = shell(down, repository, **where)  # whatever happened above: no node outlives it
    assert stopped.returncode == 0, stopped.stderr
    assert not (tmp_path / "cluster").exists()
