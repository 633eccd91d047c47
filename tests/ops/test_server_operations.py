"""Metrics over HTTP, gRPC health and reflection, on a real server."""

from __future__ import annotations

import errno
import os
import pathlib
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from click.testing import CliRunner
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from connector import StoreClient, StreamManager
from connector.background import TaskStatus
from connector.cli import cli
from connector.clock import ManualClock
from connector.errors import ResourceExhaustedError
from connector.ops.health import STORE_SERVICE
from connector.server import StoreServer
from connector.store import StoreConfig
from tests.conftest import CLOCK_START_MS, new_stream_in, wait_until
from tests.probes import NOT_SERVING, SERVING, health_of, metrics_address, scrape


@pytest.fixture
def metered(data_dir: pathlib.Path, clock: ManualClock) -> Iterator[StoreServer]:
    config = StoreConfig(data_dir=str(data_dir), clock=clock, polling_period_ms=None)
    server = StoreServer(config, metrics_listen="127.0.0.1:0").start()
    yield server
    server.stop(grace_s=0.5)


def test_the_metrics_count_a_known_workload(metered: StoreServer, clock: ManualClock) -> None:
    assert metered.metrics_address is not None
    with StoreClient(metered.uri, retry_timeout_s=2.0) as client:
        StreamManager(client).create_scope("m")
        StreamManager(client).create_stream("m", "s", segment_count=2)
        StreamManager(client).create_stream("m", "quiet", segment_count=1)
        for number in range(10):
            client.append("m/s/0", "w", number * 3, [b"abc", b"de", b"f"])
        client.append("m/s/1", "w", 0, [b"x" * 100])
        duplicate = client.append("m/s/1", "w", 0, [b"x" * 100, b"y" * 50])  # one seen before
        assert (duplicate.appended, duplicate.duplicates) == (1, 1)
        first = client.read("m/s/0", 0, max_bytes=1)
        client.read("m/s/0", first.next_offset)
        clock.advance(60_000)
        assert metered.store.advance_idle_segments() == 3

    samples = scrape(metered.metrics_address)
    s = (("stream", "m/s"),)
    assert samples[("tidemark_appended_events_total", s)] == 10 * 3 + 1 + 1
    assert samples[("tidemark_appended_bytes_total", s)] == 10 * 6 + 100 + 50
    assert samples[("tidemark_append_seconds_count", ())] == 12
    assert samples[("tidemark_read_seconds_count", ())] == 2
    assert samples[("tidemark_idle_ticks_total", ())] == 3
    assert samples[("tidemark_open_segments", ())] == 3
    assert samples[("tidemark_streams", ())] == 2
    assert samples[("tidemark_accepting_writes", ())] == 1
    # Every change was one durable group or part of one.
    assert samples[("tidemark_commit_group_changes_sum", ())] >= 3 + 12 + 1
    assert samples[("tidemark_journal_bytes", ())] > 0
    for task in ("journal_compaction", "health"):  # no idle ticks: this store has no polling
        assert samples[("tidemark_background_task_failed_rounds_total", (("task", task),))] == 0
        assert samples[("tidemark_background_task_stalled", (("task", task),))] == 0
        assert (
            "tidemark_background_task_last_success_timestamp_seconds",
            (("task", task),),
        ) in samples
    assert ("tidemark_background_task_stalled", (("task", "idle_ticks"),)) not in samples
    now = CLOCK_START_MS + 60_000
    # The idle tick put every open segment's watermark just before now: in seconds.
    watermark = samples[("tidemark_stream_tail_watermark_timestamp_seconds", s)]
    assert (now - 10) / 1000 <= watermark <= now / 1000
    lag = samples[("tidemark_stream_tail_watermark_delay_seconds", s)]
    assert lag == pytest.approx(now / 1000 - watermark, abs=1e-6)
    clock.advance(5_000)
    later = scrape(metered.metrics_address)
    assert later[("tidemark_stream_tail_watermark_delay_seconds", s)] == pytest.approx(
        lag + 5, abs=1e-6
    )


def test_health_and_reflection_answer_without_a_token(store_server: StoreServer) -> None:
    with grpc.insecure_channel(store_server.address) as channel:
        assert health_of(channel) == SERVING
        assert health_of(channel, STORE_SERVICE) == SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            health_of(channel, "no.such.Service")
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (answer,) = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
        names = {s.name for s in answer.list_services_response.service}
        assert {STORE_SERVICE, "grpc.health.v1.Health"} <= names


def test_a_metrics_port_in_use_is_an_error_naming_it(data_dir: pathlib.Path, metered) -> None:
    config = StoreConfig(data_dir=str(data_dir / "other"), polling_period_ms=None)
    server = StoreServer(config, metrics_listen=metered.metrics_address)
    with pytest.raises(Exception, match=repr(metered.metrics_address)):
        server.start()
    server.stop(grace_s=0.1)


@pytest.mark.slow
def test_health_is_not_serving_while_the_disk_is_full(
    small_disk: pathlib.Path, spawn_server
) -> None:
    server = spawn_server(small_disk / "data", "--metrics-listen", "127.0.0.1:0")
    metrics = metrics_address(server)
    with (
        StoreClient(server.uri, retry_timeout_s=2.0) as client,
        grpc.insecure_channel(server.address) as channel,
    ):
        segment = f"{new_stream_in(client)}/0"
        assert health_of(channel, STORE_SERVICE) == SERVING
        filler = small_disk / "filler"
        filler.write_bytes(b"\0" * (3 * 1024 * 1024))
        number = 0
        with pytest.raises(ResourceExhaustedError):
            while number < 10_000:
                client.append(segment, "w", number, [b"e" * 65536])
                number += 1
        wait_until(
            lambda: health_of(channel, STORE_SERVICE) == NOT_SERVING,
            what="NOT_SERVING on a full disk",
        )
        assert health_of(channel) == NOT_SERVING
        refused = CliRunner().invoke(cli, ["health", "--uri", server.uri])
        assert refused.exit_code == 5 and "is NOT_SERVING" in refused.stderr
        assert healthz(metrics) == (503, "NOT_SERVING\n")  # the metrics port says the same
        filler.unlink()
        client.append(segment, "w", number, [b"after"])
        wait_until(lambda: health_of(channel) == SERVING, what="SERVING once space returns")
        assert health_of(channel, STORE_SERVICE) == SERVING
        assert healthz(metrics) == (200, "SERVING\n")


def healthz(address: str) -> tuple[int, str]:
    """The metrics port's ``/healthz``: its status code and body."""
    try:
        with urllib.request.urlopen(f"http://{address}/healthz", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_parked_reads_gauge_counts_reads_waiting_at_a_tail(metered: StoreServer) -> None:
    assert metered.metrics_address is not None
    address = metered.metrics_address

    def parked() -> float:
        return scrape(address)[("tidemark_parked_tail_reads", ())]

    with StoreClient(metered.uri, retry_timeout_s=2.0) as client:
        segment = f"{new_stream_in(client)}/0"
        assert parked() == 0
        with ThreadPoolExecutor(max_workers=3) as pool:
            waits = [
                pool.submit(client.read, segment, 0, 1024, 60_000)  # up to a minute at the tail
                for _ in range(3)
            ]
            wait_until(lambda: parked() == 3, 10, what="three reads parked at the tail")
            client.append(segment, "w", 0, [b"wake"])  # data arrives: every wait ends
            assert all(len(w.result(timeout=30).data) > 0 for w in waits)
        wait_until(lambda: parked() == 0, 10, what="no read parked")


def test_health_is_not_serving_while_a_background_task_is_stalled(
    start_store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start_store(polling_period_ms=20, max_watermark_lag_ms=0)
    store = server.store
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        new_stream_in(client, 2)

    def idle_ticks() -> TaskStatus:
        (status,) = [s for s in server.background_status() if s.name == "idle_ticks"]
        return status

    real_sync = store.engine._journal.sync

    def failing_sync() -> None:  # the disk fails its writes, for a reason other than space
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with grpc.insecure_channel(server.address) as channel:
        assert health_of(channel) == SERVING
        monkeypatch.setattr(store.engine._journal, "sync", failing_sync)
        clock.advance(1)  # ticks are due: every round fails
        wait_until(lambda: idle_ticks().failed_rounds >= 3, what="failing idle rounds")
        assert health_of(channel) == SERVING, "failing, but not yet for longer than its bound"
        clock.advance(idle_ticks().stall_after_ms + 1)
        wait_until(lambda: health_of(channel) == NOT_SERVING, what="NOT_SERVING once stalled")
        assert health_of(channel, STORE_SERVICE) == NOT_SERVING
        assert store.accepting_writes, "the store does not refuse writes for want of space"
        assert "Input/output error" in (idle_ticks().last_error or "")

        monkeypatch.setattr(store.engine._journal, "sync", real_sync)
        wait_until(lambda: health_of(channel) == SERVING, what="SERVING once a round succeeds")
        assert idle_ticks().failing_since_ms is None


def test_the_former_name_of_the_idle_tick_flag_still_works_and_names_the_new_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from connector.server.cli import _idle_tick_after_ms, _parser  # noqa: PLC0415

    assert _idle_tick_after_ms(_parser().parse_args(["--idle-tick-after-ms", "300"])) == 300
    assert _idle_tick_after_ms(_parser().parse_args([])) == 10_000
    assert _idle_tick_after_ms(_parser().parse_args(["--max-watermark-lag-ms", "500"])) == 500
    assert "deprecated: use --idle-tick-after-ms 500" in capsys.readouterr().err
    both = _parser().parse_args(["--max-watermark-lag-ms", "5", "--idle-tick-after-ms", "5"])
    with pytest.raises(SystemExit):
        _idle_tick_after_ms(both)
