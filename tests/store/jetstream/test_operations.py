"""Operating a JetStream store: replication and leader elections in metrics, health, the flags.

Real nats-server processes (a cluster of the test's own, whose nodes it
stops) and a real gRPC server with its metrics port.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable

import pytest

from connector.client import StoreClient, StreamManager
from connector.clock import ManualClock
from connector.devtools.local_cluster import LocalCluster
from connector.errors import InvalidArgumentError
from connector.server import StoreServer
from connector.store.jetstream import JetStreamConfig
from tests.conftest import _read_listening_line, wait_until
from tests.ops.metric_rules import naming_violations
from tests.probes import scrape

pytestmark = pytest.mark.slow


def _exposition(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        return response.read().decode()


def test_metrics_show_each_logs_replicas_and_count_leader_elections(
    start_nats_cluster: Callable[..., LocalCluster], clock: ManualClock
) -> None:
    cluster = start_nats_cluster()
    config = JetStreamConfig(
        servers=tuple(cluster.urls),
        namespace=f"m{uuid.uuid4().hex[:8]}",
        clock=clock,
        polling_period_ms=None,
    )
    with StoreServer(config, metrics_listen="127.0.0.1:0") as server:
        assert server.metrics_address is not None
        with StoreClient(server.uri, retry_timeout_s=60.0) as client:
            StreamManager(client).create_scope("m")
            client.create_stream("m", "s", 2)
            client.append("m/s/0", "w", 0, [b"x"])
        samples = scrape(server.metrics_address)
        for log in ("m/s", "catalog", "state"):
            replicas = {
                dict(labels)["replica"]: value
                for (name, labels), value in samples.items()
                if name == "tidemark_replica_current" and dict(labels)["log"] == log
            }
            assert set(replicas) == {"n1", "n2", "n3"}, (log, replicas)
            leaders = [
                value
                for (name, labels), value in samples.items()
                if name == "tidemark_replica_leader" and dict(labels)["log"] == log
            ]
            assert sorted(leaders) == [0, 0, 1]
        assert naming_violations(_exposition(server.metrics_address)) == []

        leader_of = {
            dict(labels)["log"]: dict(labels)["replica"]
            for (name, labels), value in samples.items()
            if name == "tidemark_replica_leader" and value == 1
        }
        cluster.stop_node(int(leader_of["m/s"][1:]) - 1)

        def elected() -> float:
            counted = scrape(server.metrics_address)
            return counted.get(("tidemark_leader_elections_total", (("log", "m/s"),)), 0)

        wait_until(lambda: elected() >= 1, timeout=30, what="the stream's new leader counted")


def test_the_server_refuses_to_start_without_a_cluster_to_reach_in_one_line(tmp_path) -> None:
    command = [sys.executable, "-m", "connector.server", "--storage", "jetstream"]
    command += [
        "--nats-url",
        "nats://127.0.0.1:9",
        "--nats-retry-s",
        "1",
        "--listen",
        "127.0.0.1:0",
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 4
    assert finished.stderr.strip().splitlines()[-1].startswith("tidemark-server: error: connecting")
    for extra, said in (
        ([], "--storage jetstream needs --nats-url"),
        (["--nats-url", "nats://127.0.0.1:9", "--data-dir", str(tmp_path)], "--data-dir is for"),
    ):
        refused = subprocess.run([*command[:5], *extra], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2
        assert said in refused.stderr


def test_a_cluster_that_wants_a_password_is_reached_with_the_password_file_and_not_without(
    start_nats_cluster: Callable[..., LocalCluster], tmp_path
) -> None:
    cluster = start_nats_cluster(user="tidemark", password="s3cret")
    password = tmp_path / "nats.password"
    password.write_text("s3cret\n")
    command = [sys.executable, "-m", "connector.server", "--storage", "jetstream"]
    command += ["--nats-url", ",".join(cluster.urls), "--nats-retry-s", "2"]
    command += ["--listen", "127.0.0.1:0"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 4, refused.stderr
    assert "s3cret" not in refused.stderr
    with subprocess.Popen(
        [*command, "--nats-user", "tidemark", "--nats-password-file", str(password)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as server:
        try:
            address = _read_listening_line(server, timeout=30)
            with StoreClient(f"tidemark://{address}") as client:
                StreamManager(client).create_scope("auth")
                assert client.create_stream("auth", "s", 1).segments
        finally:
            server.terminate()
            assert server.wait(timeout=30) == 0


def test_a_stream_on_jetstream_may_have_at_most_999_open_segments_and_the_setting_says_why():
    """A seal or an assertion is one atomic batch of a message per open segment (at most 1,000)."""
    assert JetStreamConfig().max_segments_per_stream == 999
    assert JetStreamConfig(max_segments_per_stream=10).max_segments_per_stream == 10
    with pytest.raises(InvalidArgumentError, match="at most 999 on JetStream.*1,000 messages"):
        JetStreamConfig(max_segments_per_stream=1_000)
