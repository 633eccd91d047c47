"""The local 3-node cluster the JetStream tests, the benchmarks and ``make cluster-up`` start."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Callable

from connector.store.jetstream.local_cluster import LocalCluster
from tests.conftest import wait_until

_COMMAND = [sys.executable, "-m", "connector.store.jetstream.local_cluster"]


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
