"""A seeded fuzz of every RPC against a real server process (longer: bench/store_faults.py).

Valid, adversarial and undecodable requests, with and without bearer tokens:
no answer may be UNKNOWN or INTERNAL, nor the server's log hold a traceback.
"""

from __future__ import annotations

import pathlib

import grpc
import pytest

from connector._proto import store_pb2 as pb
from connector._proto import store_pb2_grpc
from connector._wire import GRPC_OPTIONS
from connector.security import TokenTable, token_entry
from connector.server import StoreServer
from connector.store import StoreConfig
from tests.conftest import JetStreamPlaces
from tests.faults.rpc_fuzz import KEPT_SCOPE, READER_TOKEN, RPCS, FuzzReport, RpcFuzzer, fuzz_server

SEED = 20261123
BURSTS = 15
CALLS_PER_BURST = 200


@pytest.mark.long
@pytest.mark.storages("file", "jetstream")
def test_every_rpc_fuzzed_answers_cleanly_and_leaves_stored_data_alone(
    tmp_path: pathlib.Path, storage: str, jetstream_places: JetStreamPlaces
):
    store_args = None
    if storage == "jetstream":
        store_args = [
            "--storage",
            "jetstream",
            "--nats-url",
            ",".join(jetstream_places.cluster.urls),
        ]
        store_args += ["--nats-namespace", jetstream_places.namespace(tmp_path)]
    report = fuzz_server(tmp_path / "fuzz", SEED, BURSTS, CALLS_PER_BURST, store_args=store_args)
    _assert_clean(report)


def test_every_rpc_fuzzed_with_tokens_some_without_the_right(tmp_path: pathlib.Path):
    report = fuzz_server(tmp_path / "fuzz", SEED + 1, 4, CALLS_PER_BURST, tokens=True)
    _assert_clean(report)
    assert report.stats.by_code["PERMISSION_DENIED"] > 0
    assert report.stats.by_code["UNAUTHENTICATED"] > 0


def _assert_clean(report: FuzzReport) -> None:
    assert report.problems == [], "\n".join(report.problems)
    stats = report.stats
    assert stats.calls >= 4 * CALLS_PER_BURST
    assert stats.undecodable >= stats.calls // 40, f"too few undecodable calls: {stats}"
    assert set(stats.by_rpc) == set(RPCS), f"some RPCs were never called: {stats.by_rpc}"
    assert stats.by_code["OK"] > stats.calls // 10, f"too few valid calls: {stats.by_code}"


@pytest.mark.parametrize(("scope", "stream"), [("a\nb", "s"), ("a", "x" * 100_000)])
def test_a_bad_stream_name_is_invalid_argument_quoted_on_one_line(store_stub, scope, stream):
    """Found by the fuzz: the lookup of a stream echoed any name whole, newlines and all."""
    with pytest.raises(grpc.RpcError) as refused:
        store_stub.DescribeStream(pb.DescribeStreamRequest(scope=scope, stream=stream), timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "\n" not in refused.value.details() and len(refused.value.details()) < 500


def test_a_refusal_for_want_of_a_right_quotes_a_long_scope_short(tmp_path, clock):
    """Found by the fuzz: the refusal echoed a 100 KB scope whole, past gRPC's metadata limit."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(token_entry("reader", READER_TOKEN, {KEPT_SCOPE: ["read"]}))
    config = StoreConfig(str(tmp_path / "data"), clock=clock, polling_period_ms=None)
    with (
        StoreServer(config, tokens=TokenTable(str(tokens))) as server,
        grpc.insecure_channel(server.address, options=GRPC_OPTIONS) as channel,
    ):
        with pytest.raises(grpc.RpcError) as refused:
            store_pb2_grpc.SegmentStoreStub(channel).DescribeStream(
                pb.DescribeStreamRequest(scope="x" * 100_000, stream="s"),
                metadata=[("authorization", f"Bearer {READER_TOKEN}")],
                timeout=10,
            )
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "(100000 characters)" in refused.value.details()


def test_requests_by_field_type_can_be_made_for_every_rpc():
    """An RPC added without a request maker of its own is fuzzed from its fields' types."""
    fuzzer = RpcFuzzer(stub=None, seed=SEED)  # type: ignore[arg-type]
    methods = pb.DESCRIPTOR.services_by_name["SegmentStore"].methods_by_name
    for rpc in RPCS:
        for _ in range(50):
            request = fuzzer._request_by_type(rpc)
            assert request.DESCRIPTOR.full_name == methods[rpc].input_type.full_name
