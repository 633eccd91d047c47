"""The server's metrics through an HTTP scrape: Prometheus's conventions, calls, refusals, lag."""

from __future__ import annotations

import pathlib
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from connector import BytesSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.errors import (
    InvalidArgumentError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
)
from connector.reader.group import ReaderGroupManager
from connector.security import ClientCredentials, TokenTable, token_entry
from connector.server import StoreServer
from tests.conftest import CLOCK_START_MS, wait_until
from tests.ops.metric_rules import naming_violations
from tests.probes import scrape

STORE = "tidemark.v1.SegmentStore"
_APPEND = (("method", "AppendEvents"), ("service", STORE))


@pytest.fixture
def tokens(tmp_path: pathlib.Path) -> dict[str, ClientCredentials]:
    grants = {"admin": {"*": ["read", "write", "manage"]}, "reader": {"iot": ["read"]}}
    entries = []
    credentials = {}
    for holder, rights in grants.items():
        secret = f"{holder}-token-" + "t" * 40
        (tmp_path / f"{holder}.token").write_text(secret)
        entries.append(token_entry(holder, secret, rights))
        credentials[holder] = ClientCredentials(token_file=str(tmp_path / f"{holder}.token"))
    (tmp_path / "tokens.toml").write_text("\n".join(entries))
    return credentials


@pytest.fixture
def server(storage_config, tmp_path: pathlib.Path, tokens) -> Iterator[StoreServer]:
    config = storage_config(max_event_size=64)
    server = StoreServer(
        config, tokens=TokenTable(tmp_path / "tokens.toml"), metrics_listen="127.0.0.1:0"
    ).start()
    yield server
    server.stop(grace_s=0.5)


def exposition(address: str, path: str = "/metrics") -> str:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as response:
        return response.read().decode()


def run_a_workload_that_touches_every_metric(
    server: StoreServer, tokens: dict[str, ClientCredentials], clock: ManualClock
) -> None:
    with StoreClient(server.uri, credentials=tokens["admin"], retry_timeout_s=2) as admin:
        StreamManager(admin).create_scope("iot")
        admin.create_stream("iot", "s", 2)
        ReaderGroupManager(admin).create_reader_group("iot", "g", ["iot/s"])
        clock.advance(1_000)
        admin.append("iot/s/0", "w", 0, [b"a", b"b", b"c"])
        clock.advance(2_000)
        admin.append("iot/s/1", "w", 0, [b"d"])
        admin.read("iot/s/0", 0)
        with pytest.raises(ResourceExhaustedError):
            admin.append("iot/s/0", "w", 3, [b"x" * 65])
        with pytest.raises(InvalidArgumentError):
            admin.read("iot/s/0", 1)  # not an event boundary
        admin.create_stream("iot", "asserted", 1)  # apart: its assertions move its own watermarks
        admin.assert_watermark("iot", "asserted", "w", 0, CLOCK_START_MS)
    with StoreClient(server.uri, retry_timeout_s=2) as anonymous:
        with pytest.raises(UnauthenticatedError):
            anonymous.list_scopes()
    with StoreClient(server.uri, credentials=tokens["reader"], retry_timeout_s=2) as reader:
        with pytest.raises(PermissionDeniedError):
            reader.append("iot/s/0", "w2", 0, [b"e"])
    server.store.advance_idle_segments()
    # The server counts a call as its handler ends, which can be after the client has the
    # answer: what scrapes next waits for the count of the last call.
    denied = ("tidemark_requests_total", (("code", "PERMISSION_DENIED"),) + _APPEND)
    wait_until(
        lambda: scrape(server.metrics_address).get(denied) == 1,
        timeout=10,
        what="the refused append counted",
    )


@pytest.mark.storages("file", "jetstream")
def test_every_metric_the_server_exposes_follows_prometheus_conventions(
    server: StoreServer, tokens, clock: ManualClock, storage: str
) -> None:
    run_a_workload_that_touches_every_metric(server, tokens, clock)
    assert server.metrics_address is not None
    text = exposition(server.metrics_address)
    assert naming_violations(text) == []
    assert "_created" not in text
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    # The rules were checked on these too (each has samples after the workload).
    assert {
        "tidemark_requests_total",
        "tidemark_refused_requests_total",
        "tidemark_stream_tail_watermark_timestamp_seconds",
        "tidemark_stream_tail_watermark_delay_seconds",
        "tidemark_reader_group_unread_events",
        "tidemark_reader_group_watermark_timestamp_seconds",
        "tidemark_reader_group_processing_time_watermark_timestamp_seconds",
        "tidemark_reader_group_processing_time_watermark_delay_seconds",
        "tidemark_reader_group_event_time_watermark_timestamp_seconds",
        "tidemark_reader_group_event_time_watermark_delay_seconds",
        "tidemark_reader_group_diagnosis_info",
        "tidemark_reader_group_watermark_holder_info",
        "tidemark_background_task_last_success_timestamp_seconds",
        "tidemark_stream_event_time_watermark_timestamp_seconds",
        "tidemark_stream_event_time_watermark_delay_seconds",
        "tidemark_stream_active_writers",
        "tidemark_timed_out_writers_total",
    } <= families
    if storage == "jetstream":  # a replicated store: its replicas have samples to check
        replicas = [line for line in text.splitlines() if line.startswith("tidemark_replica_")]
        assert any(line.startswith("tidemark_replica_operations_behind{") for line in replicas)


def test_the_naming_rules_catch_what_breaks_them() -> None:
    bad = "\n".join(
        [
            "# HELP tidemark_lag_ms A lag in ms.",
            "# TYPE tidemark_lag_ms gauge",
            "tidemark_lag_ms 5.0",
            "# HELP tidemark_calls Calls.",
            "# TYPE tidemark_calls counter",
            "tidemark_calls_total 1.0",
            "tidemark_calls_created 1.7e9",
            "# HELP tidemark_wm_timestamp_seconds When.",
            "# TYPE tidemark_wm_timestamp_seconds gauge",
            "tidemark_wm_timestamp_seconds 1.7e12",
            "# HELP other_thing A foreign name.",
            "# TYPE other_thing gauge",
            "other_thing 1.0",
            "# HELP tidemark_stream_watermark The watermark.",
            "# TYPE tidemark_stream_watermark gauge",
            "tidemark_stream_watermark 1.0",
            "",
        ]
    )
    found = "\n".join(naming_violations(bad))
    for expected in (
        "tidemark_lag_ms: a unit other than a base unit",
        "tidemark_calls_created: a _created series",
        "tidemark_wm_timestamp_seconds: 1700000000000.0 is milliseconds",
        "other_thing: not prefixed tidemark_",
        "tidemark_stream_watermark: a watermark is a _timestamp_seconds",
    ):
        assert expected in found, found


def test_calls_are_counted_by_method_and_code_and_refusals_by_cause(
    server: StoreServer, tokens, clock: ManualClock
) -> None:
    run_a_workload_that_touches_every_metric(server, tokens, clock)
    samples = scrape(server.metrics_address)

    def calls(method: str, code: str) -> float:
        key = (("code", code), ("method", method), ("service", STORE))
        return samples.get(("tidemark_requests_total", key), 0)

    assert calls("AppendEvents", "OK") == 2
    assert calls("AppendEvents", "RESOURCE_EXHAUSTED") == 1
    assert calls("AppendEvents", "PERMISSION_DENIED") == 1
    assert calls("ListScopes", "UNAUTHENTICATED") == 1
    assert calls("ReadSegment", "OK") == 1 and calls("ReadSegment", "INVALID_ARGUMENT") == 1
    assert calls("CreateScope", "OK") == 1
    refusals = {
        dict(labels)["cause"]: value
        for (name, labels), value in samples.items()
        if name == "tidemark_refused_requests_total"
    }
    assert refusals == {
        "unauthenticated": 1,
        "permission_denied": 1,
        "event_too_large": 1,
        "invalid_argument": 1,
    }


def test_each_reader_group_reports_its_unread_events_and_its_two_watermarks_with_delays(
    server: StoreServer, tokens, clock: ManualClock
) -> None:
    run_a_workload_that_touches_every_metric(server, tokens, clock)
    group = (("group", "iot/g"),)
    samples = scrape(server.metrics_address)
    assert samples[("tidemark_reader_group_unread_events", group)] == 4
    assert samples[("tidemark_reader_group_watermark_timestamp_seconds", group)] == (
        (CLOCK_START_MS - 1) / 1000
    )
    # The oldest unread event was ingested at +1 s (segment 0), the clock is at +3 s; no
    # writer asserts event time, so the ingestion watermark is the event time.
    processing = "tidemark_reader_group_processing_time_watermark"
    assert samples[(f"{processing}_timestamp_seconds", group)] == (CLOCK_START_MS + 999) / 1000
    assert samples[(f"{processing}_delay_seconds", group)] == 2.001
    event_time = "tidemark_reader_group_event_time_watermark"
    assert samples[(f"{event_time}_timestamp_seconds", group)] == (CLOCK_START_MS - 1) / 1000
    assert samples[(f"{event_time}_delay_seconds", group)] == 3.001
    diagnosis = (("diagnosis", "healthy"), ("group", "iot/g"))
    assert samples[("tidemark_reader_group_diagnosis_info", diagnosis)] == 1
    holder = {
        dict(labels)["cause"]
        for (name, labels) in samples
        if name == "tidemark_reader_group_watermark_holder_info"
    }
    assert holder == {"no_reader"}

    with StoreClient(server.uri, credentials=tokens["admin"], retry_timeout_s=2) as admin:
        handle = ReaderGroupManager(admin).get_reader_group("iot", "g")
        with handle.create_reader("r1", BytesSerializer(), sync_interval_ms=0) as reader:
            read = 0
            for _ in range(200):  # bounded
                read += reader.read_next_event(timeout_ms=50) is not None
                if read == 4:
                    break
    caught_up = scrape(server.metrics_address)
    assert caught_up[("tidemark_reader_group_unread_events", group)] == 0
    # Nothing unread: each segment counts its own watermark, the least is segment 0's.
    assert caught_up[(f"{processing}_timestamp_seconds", group)] == (CLOCK_START_MS + 999) / 1000


def test_each_stream_reports_its_writers_event_time_watermark_its_delay_and_its_writers(
    server: StoreServer, tokens, clock: ManualClock
) -> None:
    stream = (("stream", "iot/s"),)
    with StoreClient(server.uri, credentials=tokens["admin"], retry_timeout_s=2) as admin:
        StreamManager(admin).create_scope("iot")
        admin.create_stream("iot", "s", 2)
        samples = scrape(server.metrics_address)
        assert ("tidemark_stream_event_time_watermark_timestamp_seconds", stream) not in samples
        assert samples[("tidemark_stream_active_writers", stream)] == 0
        admin.assert_watermark("iot", "s", "slow", 0, CLOCK_START_MS - 30_000)
        admin.assert_watermark("iot", "s", "fast", 0, CLOCK_START_MS - 5_000)
        clock.advance(50_000)
        admin.assert_watermark("iot", "s", "fast", 1, CLOCK_START_MS + 40_000)
        samples = scrape(server.metrics_address)
        assert samples[("tidemark_stream_event_time_watermark_timestamp_seconds", stream)] == (
            (CLOCK_START_MS - 30_000) / 1000
        )
        assert samples[("tidemark_stream_event_time_watermark_delay_seconds", stream)] == 80.0
        assert samples[("tidemark_stream_active_writers", stream)] == 2
        clock.advance(20_000)  # slow was last seen 70 s ago: past the 60 s timeout
        assert server.store.mark_silent_writers_idle() == 1
        samples = scrape(server.metrics_address)
        assert samples[("tidemark_stream_event_time_watermark_delay_seconds", stream)] == 30.0
        assert samples[("tidemark_stream_active_writers", stream)] == 1
        assert samples[("tidemark_timed_out_writers_total", ())] == 1


def test_healthz_says_serving_and_other_paths_are_not_found(server: StoreServer) -> None:
    assert server.metrics_address is not None
    assert exposition(server.metrics_address, "/healthz") == "SERVING\n"
    with pytest.raises(urllib.error.HTTPError) as missing:
        exposition(server.metrics_address, "/nope")
    assert missing.value.code == 404
