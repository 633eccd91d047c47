"""Bad requests: the right gRPC status, the right domain error, and nothing stored is lost.

Each case is sent twice: through the raw generated stub, to check the status
code and its details, and through :class:`StoreClient`, to check that callers
catch the same exception class as with a local store. Afterwards the server
must still serve every event stored before and take new ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc
import pytest

from connector._proto import store_pb2 as pb
from connector._proto import store_pb2_grpc
from connector._wire import GRPC_OPTIONS
from connector.client import StoreClient
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    SegmentSealedError,
    TidemarkError,
)
from connector.server import StoreServer
from tests.store import frame_size, payloads

pytestmark = pytest.mark.storages("file", "jetstream")

MAX_EVENT = 1024
STORED = {
    "sc/st/0": [b"zero-0", b"zero-1", b"zero-2"],
    "sc/st/1": [b"one-0"],
    "sc/st/2": [],
    "sc/done/0": [b"done-0", b"done-1"],
}


@dataclass
class Store:
    """A seeded store: its server, a client and a raw stub."""

    server: StoreServer
    client: StoreClient
    stub: store_pb2_grpc.SegmentStoreStub


@pytest.fixture
def store(start_store: Callable[..., StoreServer]) -> Iterator[Store]:
    """A store holding ``STORED``; stream sc/done is sealed. Checks it still serves afterwards."""
    server = start_store(max_event_size=MAX_EVENT)
    client = StoreClient(server.uri, retry_timeout_s=2.0)
    client.create_scope("sc")
    client.create_stream("sc", "st", 3)
    client.create_stream("sc", "done", 1)
    for segment, events in STORED.items():
        if events:
            client.append(segment, "seed", 0, events)
    client.seal_stream("sc", "done")
    channel = grpc.insecure_channel(server.address, options=GRPC_OPTIONS)
    yield Store(server, client, store_pb2_grpc.SegmentStoreStub(channel))
    _assert_still_serving(client)
    channel.close()
    client.close()


def _assert_still_serving(client: StoreClient) -> None:
    for segment, events in STORED.items():
        assert payloads(client, segment) == events, f"{segment} lost data"
    [segment] = client.create_stream("sc", "after", 1).segments
    result = client.append(segment.segment, "after", 0, [b"still-here"])
    assert (result.appended, result.duplicates) == (1, 0)
    assert payloads(client, segment.segment) == [b"still-here"]


def _status(call: Callable[..., object], request: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=10)
    return caught.value


def _expect(
    raw_call: Callable[..., object],
    raw_request: object,
    client_call: Callable[[], object],
    code: grpc.StatusCode,
    error_type: type[TidemarkError],
    *named: str,
) -> TidemarkError:
    """Checks the raw status and the client's exception; both messages name every ``named``."""
    error = _status(raw_call, raw_request)
    assert error.code() == code, error.details()
    for value in named:
        assert value in error.details(), f"{value!r} not named in {error.details()!r}"
    with pytest.raises(error_type) as caught:
        client_call()
    assert type(caught.value) is error_type
    for value in named:
        assert value in str(caught.value)
    return caught.value


# --- not found --------------------------------------------------------------


def test_creating_a_stream_in_an_unknown_scope_is_not_found(store: Store) -> None:
    _expect(
        store.stub.CreateStream,
        pb.CreateStreamRequest(scope="ghost", stream="s", segment_count=1),
        lambda: store.client.create_stream("ghost", "s", 1),
        grpc.StatusCode.NOT_FOUND,
        NotFoundError,
        "'ghost'",
    )


def test_an_unknown_stream_is_not_found(store: Store) -> None:
    _expect(
        store.stub.DescribeStream,
        pb.DescribeStreamRequest(scope="sc", stream="ghost"),
        lambda: store.client.describe_stream("sc", "ghost"),
        grpc.StatusCode.NOT_FOUND,
        NotFoundError,
        "sc/ghost",
    )
    _expect(
        store.stub.ScaleStream,
        pb.ScaleStreamRequest(scope="sc", stream="ghost", sealed_segments=[0], split_count=2),
        lambda: store.client.scale_stream("sc", "ghost", [0], 2),
        grpc.StatusCode.NOT_FOUND,
        NotFoundError,
        "sc/ghost",
    )


def test_an_unknown_segment_is_not_found_for_reads_appends_and_info(store: Store) -> None:
    _expect(
        store.stub.ReadSegment,
        pb.ReadRequest(segment="sc/st/99", offset=0, max_bytes=100),
        lambda: store.client.read("sc/st/99", 0),
        grpc.StatusCode.NOT_FOUND,
        NotFoundError,
        "sc/st/99",
    )
    _expect(
        store.stub.AppendEvents,
        pb.AppendRequest(segment="sc/st/99", writer_id="w", events=[b"x"]),
        lambda: store.client.append("sc/st/99", "w", 0, [b"x"]),
        grpc.StatusCode.NOT_FOUND,
        NotFoundError,
        "sc/st/99",
    )
    _expect(
        store.stub.GetSegmentInfo,
        pb.SegmentInfoRequest(segment="ghost/st/0"),
        lambda: store.client.segment_info("ghost/st/0"),
        grpc.StatusCode.NOT_FOUND,
        NotFoundError,
        "ghost/st",
    )


# --- offsets ----------------------------------------------------------------


def test_an_offset_inside_an_event_is_an_invalid_argument(store: Store) -> None:
    _expect(
        store.stub.ReadSegment,
        pb.ReadRequest(segment="sc/st/0", offset=5, max_bytes=100),
        lambda: store.client.read("sc/st/0", 5),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        "offset 5",
        "sc/st/0",
    )
    inside_second = frame_size(b"zero-0") + 3
    _expect(
        store.stub.ReadSegment,
        pb.ReadRequest(segment="sc/st/0", offset=inside_second, max_bytes=100),
        lambda: store.client.read("sc/st/0", inside_second),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        f"offset {inside_second}",
    )


def test_an_offset_past_the_end_or_negative_is_an_invalid_argument(store: Store) -> None:
    end = store.client.segment_info("sc/st/0").write_offset
    for offset in (end + 1, end + frame_size(b"zero-3"), -1):
        _expect(
            store.stub.ReadSegment,
            pb.ReadRequest(segment="sc/st/0", offset=offset, max_bytes=100),
            lambda offset=offset: store.client.read("sc/st/0", offset),
            grpc.StatusCode.INVALID_ARGUMENT,
            InvalidArgumentError,
            f"offset {offset}",
            f"0 to {end}",
        )


# --- limits and names -------------------------------------------------------


def test_an_event_over_the_size_limit_is_resource_exhausted_and_its_batch_not_stored(
    store: Store,
) -> None:
    batch = [b"fits", b"x" * (MAX_EVENT + 1)]
    _expect(
        store.stub.AppendEvents,
        pb.AppendRequest(segment="sc/st/2", writer_id="w", events=batch),
        lambda: store.client.append("sc/st/2", "w", 0, batch),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ResourceExhaustedError,
        f"{MAX_EVENT + 1} bytes",
        f"limit of {MAX_EVENT}",
    )
    assert store.client.segment_info("sc/st/2").write_offset == 0
    [big] = store.client.create_stream("sc", "big", 1).segments
    at_limit = store.client.append(big.segment, "w", 0, [b"y" * MAX_EVENT])
    assert at_limit.appended == 1


@pytest.mark.parametrize("name", ["", "has space", "a/b", "-leading-dash", "x" * 101, "ünïcode"])
def test_invalid_scope_and_stream_names_are_invalid_arguments(store: Store, name: str) -> None:
    _expect(
        store.stub.CreateScope,
        pb.CreateScopeRequest(scope=name),
        lambda: store.client.create_scope(name),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        f"invalid scope name {name!r}",
    )
    _expect(
        store.stub.CreateStream,
        pb.CreateStreamRequest(scope="sc", stream=name, segment_count=1),
        lambda: store.client.create_stream("sc", name, 1),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        f"invalid stream name {name!r}",
    )


@pytest.mark.parametrize(
    ("writer_id", "first", "events", "named"),
    [
        ("", 0, [b"x"], "writer_id must be 1 to 256 characters, got ''"),
        ("w" * 257, 0, [b"x"], "writer_id must be 1 to 256 characters"),
        ("w", -1, [b"x"], "first_event_number must be >= 0, got -1"),
        ("w", 0, [], "an append to 'sc/st/2' needs at least one event"),
    ],
)
def test_an_append_without_writer_id_events_or_with_a_negative_number_is_invalid(
    store: Store, writer_id: str, first: int, events: list[bytes], named: str
) -> None:
    request = pb.AppendRequest(
        segment="sc/st/2", writer_id=writer_id, first_event_number=first, events=events
    )
    _expect(
        store.stub.AppendEvents,
        request,
        lambda: store.client.append("sc/st/2", writer_id, first, events),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        named,
    )


@pytest.mark.parametrize("segment", ["sc/st", "sc/st/x", "sc/st/0/1", "sc/st/-1", "bad name/st/0"])
def test_a_malformed_segment_name_is_an_invalid_argument(store: Store, segment: str) -> None:
    _expect(
        store.stub.ReadSegment,
        pb.ReadRequest(segment=segment, offset=0, max_bytes=100),
        lambda: store.client.read(segment, 0),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        repr(segment.split("/")[0]) if segment.startswith("bad") else repr(segment),
    )


@pytest.mark.parametrize("count", [0, -2])
def test_a_segment_count_below_one_is_an_invalid_argument(store: Store, count: int) -> None:
    _expect(
        store.stub.CreateStream,
        pb.CreateStreamRequest(scope="sc", stream="new", segment_count=count),
        lambda: store.client.create_stream("sc", "new", count),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        f"segment_count must be 1 to {store.server.store.config.max_segments_per_stream}, "
        f"got {count!r}",
    )


def test_a_segment_count_over_the_stream_limit_is_refused_naming_the_limit(store: Store) -> None:
    limit = store.server.store.config.max_segments_per_stream  # 16,384; 999 on JetStream
    error = _expect(
        store.stub.CreateStream,
        pb.CreateStreamRequest(scope="sc", stream="new", segment_count=limit + 1),
        lambda: store.client.create_stream("sc", "new", limit + 1),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ResourceExhaustedError,
        f"segment_count {limit + 1} is over the limit of {limit} open segments per stream",
        "--max-segments-per-stream",
    )
    assert isinstance(error, ResourceExhaustedError) and error.cause == "stream_segment_limit"


def test_a_read_budget_that_is_not_positive_is_an_invalid_argument(store: Store) -> None:
    _expect(
        store.stub.ReadSegment,
        pb.ReadRequest(segment="sc/st/0", offset=0),
        lambda: store.client.read("sc/st/0", 0, max_bytes=0),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        "max_bytes must be > 0, got 0",
    )


# --- state the request conflicts with ---------------------------------------


def test_appending_to_a_sealed_segment_fails_its_precondition(store: Store) -> None:
    error = _expect(
        store.stub.AppendEvents,
        pb.AppendRequest(
            segment="sc/done/0", writer_id="seed", first_event_number=2, events=[b"late"]
        ),
        lambda: store.client.append("sc/done/0", "seed", 2, [b"late"]),
        grpc.StatusCode.FAILED_PRECONDITION,
        SegmentSealedError,
        "'sc/done/0'",
        "sealed",
    )
    assert isinstance(error, FailedPreconditionError)
    store.client.scale_stream("sc", "st", [2], 2)  # seals sc/st/2, successors 3 and 4
    _expect(
        store.stub.AppendEvents,
        pb.AppendRequest(segment="sc/st/2", writer_id="w", events=[b"x"]),
        lambda: store.client.append("sc/st/2", "w", 0, [b"x"]),
        grpc.StatusCode.FAILED_PRECONDITION,
        SegmentSealedError,
        "'sc/st/2'",
    )


def test_the_client_s_segment_sealed_error_names_the_segment_and_its_successors(
    store: Store,
) -> None:
    store.client.scale_stream("sc", "st", [2], 2)
    with pytest.raises(SegmentSealedError) as split:
        store.client.append("sc/st/2", "w", 0, [b"x"])
    assert (split.value.segment, split.value.successors) == ("sc/st/2", ("sc/st/3", "sc/st/4"))
    with pytest.raises(SegmentSealedError) as sealed:
        store.client.append("sc/done/0", "w", 0, [b"x"])
    assert (sealed.value.segment, sealed.value.successors) == ("sc/done/0", ())
    with pytest.raises(SegmentSealedError) as scaled:
        store.client.scale_stream("sc", "st", [2], 2)
    assert (scaled.value.segment, scaled.value.successors) == ("sc/st/2", ("sc/st/3", "sc/st/4"))


def test_scaling_a_sealed_segment_fails_its_precondition(store: Store) -> None:
    _expect(
        store.stub.ScaleStream,
        pb.ScaleStreamRequest(scope="sc", stream="done", sealed_segments=[0], split_count=2),
        lambda: store.client.scale_stream("sc", "done", [0], 2),
        grpc.StatusCode.FAILED_PRECONDITION,
        SegmentSealedError,
        "'sc/done/0'",
        "sealed already",
    )
    _expect(
        store.stub.SealStream,
        pb.SealStreamRequest(scope="sc", stream="done"),
        lambda: store.client.seal_stream("sc", "done"),
        grpc.StatusCode.FAILED_PRECONDITION,
        FailedPreconditionError,
        "sc/done",
    )


def test_an_existing_scope_or_stream_already_exists(store: Store) -> None:
    _expect(
        store.stub.CreateScope,
        pb.CreateScopeRequest(scope="sc"),
        lambda: store.client.create_scope("sc"),
        grpc.StatusCode.ALREADY_EXISTS,
        AlreadyExistsError,
        "'sc'",
    )
    _expect(
        store.stub.CreateStream,
        pb.CreateStreamRequest(scope="sc", stream="st", segment_count=5),
        lambda: store.client.create_stream("sc", "st", 5),
        grpc.StatusCode.ALREADY_EXISTS,
        AlreadyExistsError,
        "sc/st",
    )
    assert len(store.client.describe_stream("sc", "st").segments) == 3


def test_a_gap_in_writer_event_numbers_fails_its_precondition(store: Store) -> None:
    error = _expect(
        store.stub.AppendEvents,
        pb.AppendRequest(segment="sc/st/0", writer_id="seed", first_event_number=5, events=[b"x"]),
        lambda: store.client.append("sc/st/0", "seed", 5, [b"x"]),
        grpc.StatusCode.FAILED_PRECONDITION,
        FailedPreconditionError,
        "'seed'",
        "event number 5",
        "expected is 3",
    )
    assert not isinstance(error, SegmentSealedError)
    _expect(
        store.stub.AppendEvents,
        pb.AppendRequest(segment="sc/st/1", writer_id="new", first_event_number=1, events=[b"x"]),
        lambda: store.client.append("sc/st/1", "new", 1, [b"x"]),
        grpc.StatusCode.FAILED_PRECONDITION,
        FailedPreconditionError,
        "event number 1",
        "expected is 0",
    )


def test_a_gap_is_refused_unless_it_lies_in_numbers_the_writer_discarded(store: Store) -> None:
    # "seed" stored 0..2 in sc/st/0; its numbers 3..4 were discarded, their fate unknown.
    _expect(
        store.stub.AppendEvents,
        pb.AppendRequest(
            segment="sc/st/0",
            writer_id="seed",
            first_event_number=6,
            discarded_from=4,
            events=[b"x"],
        ),
        lambda: store.client.append("sc/st/0", "seed", 6, [b"x"], discarded_from=4),
        grpc.StatusCode.FAILED_PRECONDITION,
        FailedPreconditionError,
        "event number 6 (discarded from 4)",
        "expected is 3",
    )
    _expect(
        store.stub.AppendEvents,
        pb.AppendRequest(
            segment="sc/st/0",
            writer_id="seed",
            first_event_number=5,
            discarded_from=6,
            events=[b"x"],
        ),
        lambda: store.client.append("sc/st/0", "seed", 5, [b"x"], discarded_from=6),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        "discarded_from",
        "6",
    )
    [segment] = store.client.create_stream("sc", "gap", 1).segments
    name = segment.segment
    store.client.append(name, "w", 0, [b"kept 0", b"kept 1", b"kept 2"])
    result = store.client.append(name, "w", 5, [b"after"], discarded_from=3)
    assert (result.appended, result.duplicates) == (1, 0)
    late = store.client.append(name, "w", 3, [b"discarded 3", b"discarded 4"])
    assert (late.appended, late.duplicates) == (0, 2)  # a late copy of the discarded batch
    assert payloads(store.client, name) == [b"kept 0", b"kept 1", b"kept 2", b"after"]


@pytest.mark.parametrize("split_count", [-1, 0, 1])
def test_a_split_count_out_of_range_is_an_invalid_argument(store: Store, split_count: int) -> None:
    _expect(
        store.stub.ScaleStream,
        pb.ScaleStreamRequest(
            scope="sc", stream="st", sealed_segments=[1], split_count=split_count
        ),
        lambda: store.client.scale_stream("sc", "st", [1], split_count),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        f"got {split_count!r}",
    )


@pytest.mark.parametrize("over", [1, 2**31 - 1])
def test_a_split_past_the_stream_limit_is_refused_naming_the_limit(store: Store, over: int) -> None:
    limit = store.server.store.config.max_segments_per_stream
    split_count = min(limit - 1 + over, 2**31 - 1)  # sc/st has 3 open segments
    _expect(
        store.stub.ScaleStream,
        pb.ScaleStreamRequest(
            scope="sc", stream="st", sealed_segments=[1], split_count=split_count
        ),
        lambda: store.client.scale_stream("sc", "st", [1], split_count),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ResourceExhaustedError,
        f"stream sc/st would have {split_count + 2} open segments, over the limit of {limit}",
    )


@pytest.mark.parametrize(
    ("numbers", "split_count", "named"),
    [
        ([0, 2], 0, "'sc/st/0' and 'sc/st/2' are not adjacent"),
        ([1, 1], 0, "names a segment twice: [1, 1]"),
        ([0, 1], 2, "split_count 0, got 2"),
        ([], 0, "at least one segment"),
    ],
)
def test_a_merge_of_non_adjacent_or_repeated_segments_is_an_invalid_argument(
    store: Store, numbers: list[int], split_count: int, named: str
) -> None:
    _expect(
        store.stub.ScaleStream,
        pb.ScaleStreamRequest(
            scope="sc", stream="st", sealed_segments=numbers, split_count=split_count
        ),
        lambda: store.client.scale_stream("sc", "st", numbers, split_count),
        grpc.StatusCode.INVALID_ARGUMENT,
        InvalidArgumentError,
        named,
    )
