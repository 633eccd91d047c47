"""Names parsed strictly, long values quoted short, and one request's cost bounded."""

from __future__ import annotations

import grpc
import pytest

from connector import StoreClient, StreamManager
from connector._proto import store_pb2 as pb
from connector._wire import MAX_EVENTS_PER_APPEND
from connector.errors import InvalidArgumentError, ResourceExhaustedError
from connector.names import SegmentId
from tests.conftest import new_stream_in

pytestmark = pytest.mark.storages("file", "jetstream")


@pytest.mark.parametrize(
    "name", ["a/b/²", "a/b/٣", "a/b/007", "a/b/-1", "a/b/ 1", "a/b/" + "9" * 4300]
)
def test_a_segment_number_is_ascii_digits_with_one_spelling(name):
    with pytest.raises(InvalidArgumentError, match="invalid segment"):
        SegmentId.parse(name)


def test_a_segment_number_parses_in_its_one_spelling():
    assert SegmentId.parse("a/b/0").number == 0
    assert SegmentId.parse("a/b/12").number == 12


@pytest.mark.parametrize("name", ["r/s/²", "r/s/" + "9" * 4300, "r/s/007", "x" * 100_000])
def test_bad_segment_names_are_invalid_argument_over_grpc_never_unknown(store_stub, name):
    with pytest.raises(grpc.RpcError) as refused:
        store_stub.ReadSegment(pb.ReadRequest(segment=name, offset=0, max_bytes=10), timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(refused.value.details()) < 2_000


def test_a_long_name_is_quoted_short_in_the_error(store_client):
    with pytest.raises(InvalidArgumentError) as refused:
        StreamManager(store_client).create_scope("x" * 100_000)
    assert "(100000 characters)" in str(refused.value) and len(str(refused.value)) < 500


def test_an_append_over_the_event_count_limit_is_refused_before_it_costs(store_client):
    segment = f"{new_stream_in(store_client)}/0"
    with pytest.raises(ResourceExhaustedError, match=f"over the limit of {MAX_EVENTS_PER_APPEND}"):
        store_client.append(segment, "w", 0, [b"x"] * (MAX_EVENTS_PER_APPEND + 1))
    assert store_client.segment_info(segment).write_offset == 0


def test_streams_past_the_segment_limit_are_refused_with_the_limit_as_cause(start_store):
    server = start_store(max_segments=3)
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        manager = StreamManager(client)
        manager.create_scope("lim")
        manager.create_stream("lim", "a", segment_count=2)
        with pytest.raises(ResourceExhaustedError, match="limit is 3") as refused:
            manager.create_stream("lim", "b", segment_count=2)
        assert refused.value.cause == "segment_limit"
        with pytest.raises(ResourceExhaustedError, match="limit is 3") as refused:
            client.scale_stream("lim", "a", [0], split_count=2)
        assert refused.value.cause == "segment_limit"
        assert [s.segment for s in client.describe_stream("lim", "a").segments] == [
            "lim/a/0",
            "lim/a/1",
        ]
