"""A client is back within about a second of its server restarting, whatever the outage."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from connector import StoreClient
from tests.conftest import new_stream_in

pytestmark = [pytest.mark.slow, pytest.mark.storages("file", "jetstream")]

#: How long the server stays down: long enough for gRPC's default reconnect backoff
#: (1 s growing by 1.6 each try) to leave several seconds between connection attempts.
OUTAGE_S = 6.0


def test_a_retried_call_goes_through_soon_after_the_server_is_back(tmp_path, spawn_server):
    data_dir = tmp_path / "data"
    server = spawn_server(data_dir)
    client = StoreClient(server.uri, retry_timeout_s=60.0)
    scope, stream = new_stream_in(client).split("/")
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)

    answered_at: list[float] = []

    def describe() -> None:
        client.describe_stream(scope, stream)  # retried while the server is away
        answered_at.append(time.monotonic())

    caller = threading.Thread(target=describe, daemon=True)
    caller.start()
    time.sleep(OUTAGE_S)  # the outage itself, not a wait for a condition
    restarted = spawn_server(data_dir, "--listen", server.address)
    back_at = time.monotonic()  # spawn_server returns once the server listens
    caller.join(timeout=30)
    assert answered_at, "the retried call never went through"
    assert answered_at[0] - back_at < 2.0, f"took {answered_at[0] - back_at:.2f} s"
    assert restarted.address == server.address
    client.close()
