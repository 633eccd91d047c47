"""A seeded fuzz of every RPC against a real server process (longer: bench/store_faults.py)."""

from __future__ import annotations

import pathlib

import grpc
import pytest

from connector._proto import store_pb2 as pb
from tests.store.rpc_fuzz import RPCS, fuzz_server

SEED = 20261123
BURSTS = 15
CALLS_PER_BURST = 200


def test_every_rpc_fuzzed_answers_cleanly_and_leaves_stored_data_alone(tmp_path: pathlib.Path):
    report = fuzz_server(tmp_path / "fuzz", SEED, BURSTS, CALLS_PER_BURST)
    assert report.problems == [], "\n".join(report.problems)
    stats = report.stats
    assert stats.calls >= BURSTS * CALLS_PER_BURST
    assert set(stats.by_rpc) == set(RPCS), f"some RPCs were never called: {stats.by_rpc}"
    assert stats.by_code["OK"] > stats.calls // 10, f"too few valid calls: {stats.by_code}"


@pytest.mark.parametrize(("scope", "stream"), [("a\nb", "s"), ("a", "x" * 100_000)])
def test_a_bad_stream_name_is_invalid_argument_quoted_on_one_line(store_stub, scope, stream):
    """Found by the fuzz: the lookup of a stream echoed any name whole, newlines and all."""
    with pytest.raises(grpc.RpcError) as refused:
        store_stub.DescribeStream(pb.DescribeStreamRequest(scope=scope, stream=stream), timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "\n" not in refused.value.details() and len(refused.value.details()) < 500
