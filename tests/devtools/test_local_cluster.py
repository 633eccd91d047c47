"""The local 3-node cluster the JetStream tests, the benchmarks and ``make cluster-up`` start."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest

from connector.devtools.local_cluster import LocalCluster
from tests.conftest import wait_until

_COMMAND = [sys.executable, "-m", "connector.devtools.local_cluster"]


def test_the_command_line_starts_reports_and_stops_a_cluster(tmp_path: pathlib.Path) -> None:
    folder = str(tmp_path / "cluster")
    up = subprocess.run([*_COMMAND, "up", "--dir", folder], capture_output=True, text=True)
    try:
        assert up.returncode == 0, up.stderr
        urls = up.stdout.strip().split(",")
        assert len(urls) == 3 and all(u.startswith("nats://127.0.0.1:") for u in urls)
        again = subprocess.run([*_COMMAND, "up", "--dir", folder], capture_output=True, text=True)
        assert again.stdout.strip().split(",") == urls  # already up: the same cluster
        status = subprocess.run([*_COMMAND, "status", "--dir", folder], capture_output=True)
        assert status.returncode == 0
        assert status.stdout.decode().count(" ok\n") == 3
    finally:
        down = subprocess.run([*_COMMAND, "down", "--dir", folder, "--wipe"], capture_output=True)
    assert down.returncode == 0 and b"stopped 3 node(s)" in down.stdout
    assert not pathlib.Path(folder).exists()
    status = subprocess.run([*_COMMAND, "status", "--dir", folder], capture_output=True)
    assert status.returncode == 1


def test_the_cluster_elects_a_meta_leader_again_after_a_node_is_killed(
    start_nats_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = start_nats_cluster()
    names = [cluster.node_name(n) for n in range(3)]
    killed = names.index(wait_until(lambda: cluster.meta_leader(0), what="a meta leader"))
    cluster.kill_node(killed)
    alive = next(n for n in range(3) if n != killed)
    wait_until(
        lambda: cluster.meta_leader(alive) not in (None, cluster.node_name(killed)),
        timeout=30,
        what="a new meta leader among the two nodes left",
    )
    cluster.start_node(killed)
    cluster.wait_ready()


def test_a_cluster_starts_on_other_ports_when_another_process_took_one(
    tmp_path: pathlib.Path,
) -> None:
    """A port found free can be taken before its node binds it (other test runs share the host)."""
    cluster = LocalCluster(str(tmp_path / "cluster"))
    taken = cluster.ports[1].cluster
    with socket.create_server((cluster.host, taken)), cluster:
        assert all(taken not in (p.client, p.cluster, p.monitor) for p in cluster.ports)
        assert all(cluster.running(node) for node in range(3))


def _nodes_running_in(folder: pathlib.Path) -> list[int]:
    """The pids of nats-server processes whose configuration is in ``folder``."""
    running = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if any(part.startswith(str(folder).encode() + b"/") for part in command[1:]):
            if b"nats-server" in command[0]:
                running.append(int(entry.name))
    return running


def _kill_nodes_in(folder: pathlib.Path) -> None:
    """Kills what a failing test would leave behind in ``folder`` (its own nodes only)."""
    for pid in _nodes_running_in(folder):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_the_nodes_die_with_the_process_that_started_them_even_by_kill_9(
    tmp_path: pathlib.Path,
) -> None:
    folder = tmp_path / "cluster"
    starter = (
        "import sys\n"
        "from connector.devtools.local_cluster import LocalCluster\n"
        "LocalCluster(sys.argv[1]).start()\n"
        "print('up', flush=True)\n"
        "sys.stdin.read()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", starter, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"up\n"
        assert len(_nodes_running_in(folder)) == 3
        process.kill()  # no teardown, no atexit: as a test run killed by a timeout
        process.wait(timeout=10)
        wait_until(lambda: not _nodes_running_in(folder), timeout=10, what="no node left")
    finally:
        process.kill()
        process.wait(timeout=10)
        _kill_nodes_in(folder)


def test_a_start_that_fails_stops_the_nodes_it_started(tmp_path: pathlib.Path) -> None:
    folder = tmp_path / "cluster"
    try:
        with pytest.raises(TimeoutError, match="meta leader"):
            LocalCluster(str(folder)).start(timeout_s=0)  # the nodes run, but not ready yet
        assert _nodes_running_in(folder) == []
    finally:
        _kill_nodes_in(folder)


def test_up_over_a_cluster_with_a_dead_node_stops_what_is_left_of_it_first(
    tmp_path: pathlib.Path,
) -> None:
    folder = tmp_path / "cluster"
    try:
        first = subprocess.run([*_COMMAND, "up", "--dir", str(folder)], capture_output=True)
        assert first.returncode == 0, first.stderr
        old = sorted(_nodes_running_in(folder))
        assert len(old) == 3
        os.kill(int((folder / "n1.pid").read_text()), signal.SIGKILL)
        again = subprocess.run([*_COMMAND, "up", "--dir", str(folder)], capture_output=True)
        assert again.returncode == 0, again.stderr
        assert again.stdout != first.stdout  # a fresh cluster, on new ports
        new = _nodes_running_in(folder)
        assert len(new) == 3 and not set(old) & set(new)
        down = subprocess.run([*_COMMAND, "down", "--dir", str(folder)], capture_output=True)
        assert b"stopped 3 node(s)" in down.stdout
        assert _nodes_running_in(folder) == []
    finally:
        _kill_nodes_in(folder)
