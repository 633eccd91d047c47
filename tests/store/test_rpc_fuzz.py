"""A seeded fuzz of every RPC against a real server process (longer: bench/store_faults.py)."""

from __future__ import annotations

import hashlib
import pathlib

import grpc
import pytest

from connector._proto import store_pb2 as pb
from tests.store.rpc_fuzz import KEPT_SCOPE, RPCS, FuzzTarget, RpcFuzzer

SEED = 20261123
BURSTS = 15
CALLS_PER_BURST = 200


def _store_kept_data(target: FuzzTarget) -> tuple[list[str], dict[str, bytes]]:
    """Writes the data the fuzz must leave alone; returns its segments and their bytes."""
    stub = target.stub
    assert stub is not None
    stub.CreateScope(pb.CreateScopeRequest(scope=KEPT_SCOPE), timeout=10)
    stream = stub.CreateStream(
        pb.CreateStreamRequest(scope=KEPT_SCOPE, stream="k", segment_count=2), timeout=10
    )
    segments = [s.segment for s in stream.segments]
    for number in range(20):
        for segment in segments:
            events = [f"{segment}#{number}.{i}".encode() * (i + 1) for i in range(number + 1)]
            stub.AppendEvents(
                pb.AppendRequest(
                    segment=segment,
                    writer_id="keeper",
                    first_event_number=number * (number + 1) // 2,
                    events=events,
                    routing_keys=[f"key-{i}" for i in range(len(events))],
                ),
                timeout=10,
            )
    stub.CompareAndSetState(
        pb.CompareAndSetStateRequest(key="kept-state", expected_revision=0, value=b"\x00kept\xff"),
        timeout=10,
    )
    return segments, _kept_bytes(target, segments)


def _kept_bytes(target: FuzzTarget, segments: list[str]) -> dict[str, bytes]:
    """Each kept segment's whole data as a read returns it, and its data file's digest."""
    stub = target.stub
    assert stub is not None
    found: dict[str, bytes] = {}
    for segment in segments:
        end = stub.GetSegmentInfo(pb.SegmentInfoRequest(segment=segment), timeout=10).write_offset
        read = stub.ReadSegment(
            pb.ReadRequest(segment=segment, offset=0, max_bytes=end), timeout=10
        )
        assert read.next_offset == end
        found[segment] = read.data
        data_file = target.data_dir / "segments" / f"{segment}.events"
        found[segment + " file"] = hashlib.sha256(data_file.read_bytes()).digest()
    state = stub.GetState(pb.GetStateRequest(key="kept-state"), timeout=10)
    found["state"] = state.value + state.revision.to_bytes(8, "big")
    return found


def test_every_rpc_fuzzed_answers_cleanly_and_leaves_stored_data_alone(tmp_path: pathlib.Path):
    target = FuzzTarget(tmp_path / "fuzz").start()
    try:
        kept_segments, kept = _store_kept_data(target)
        fuzzer = RpcFuzzer(
            target.stub,
            SEED,
            forbidden=[str(target.data_dir), str(tmp_path)],
            kept_segments=kept_segments,
        )
        fuzzer.setup()
        for burst in range(BURSTS):
            fuzzer.burst(CALLS_PER_BURST)
            assert len(fuzzer.failures) < 50, "\n".join(fuzzer.failures[:10])
            assert target.alive(), f"the server died in burst {burst}: {target.log()[-2000:]}"
            described = target.stub.DescribeStream(
                pb.DescribeStreamRequest(scope=KEPT_SCOPE, stream="k"), timeout=10
            )
            assert [s.segment for s in described.segments] == kept_segments

        assert fuzzer.failures == [], "\n".join(fuzzer.failures[:10])
        stats = fuzzer.stats
        assert stats.calls >= BURSTS * CALLS_PER_BURST
        assert set(stats.by_rpc) == set(RPCS), f"some RPCs were never called: {stats.by_rpc}"
        assert stats.by_code["OK"] > stats.calls // 10, f"too few valid calls: {stats.by_code}"
        assert _kept_bytes(target, kept_segments) == kept

        target.kill()  # the journal the fuzz left must replay
        target.start()
        assert _kept_bytes(target, kept_segments) == kept
        assert target.stray_files() == []
        assert "Traceback" not in target.log()
    finally:
        target.kill()


@pytest.mark.parametrize(("scope", "stream"), [("a\nb", "s"), ("a", "x" * 100_000)])
def test_a_bad_stream_name_is_invalid_argument_quoted_on_one_line(store_stub, scope, stream):
    """Found by the fuzz: the lookup of a stream echoed any name whole, newlines and all."""
    with pytest.raises(grpc.RpcError) as refused:
        store_stub.DescribeStream(pb.DescribeStreamRequest(scope=scope, stream=stream), timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "\n" not in refused.value.details() and len(refused.value.details()) < 500
