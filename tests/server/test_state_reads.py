"""Reading a state value the caller holds already: answered "unchanged", without its bytes."""

from __future__ import annotations

import pytest

from connector import StoreClient
from connector._proto import store_pb2 as pb
from connector._proto import store_pb2_grpc
from connector.server import StoreServer

pytestmark = pytest.mark.storages("file", "jetstream")

KEY = "readergroup/s/g"


def state_reads(server: StoreServer, answer: str) -> float:
    labels = {"answer": answer}
    return server.metrics.registry.get_sample_value("tidemark_state_reads_total", labels) or 0.0


def test_a_read_at_the_known_revision_is_unchanged_and_any_other_sends_the_value(
    store_server: StoreServer,
    store_client: StoreClient,
    store_stub: store_pb2_grpc.SegmentStoreStub,
) -> None:
    store_client.create_scope("s")
    _, first = store_client.compare_and_set_state(KEY, 0, b"one")
    _, second = store_client.compare_and_set_state(KEY, first.revision, b"two")

    held = store_client.get_state(KEY, known_revision=second.revision)
    assert (held.unchanged, held.value, held.revision) == (True, b"", second.revision)
    stale = store_client.get_state(KEY, known_revision=first.revision)
    assert (stale.unchanged, stale.value, stale.revision) == (False, b"two", second.revision)
    assert store_stub.GetState(pb.GetStateRequest(key=KEY)).value == b"two"  # an older client
    assert (state_reads(store_server, "unchanged"), state_reads(store_server, "value")) == (1, 2)
    bytes_sent = store_server.metrics.registry.get_sample_value("tidemark_state_read_bytes_total")
    assert bytes_sent == 2 * len(b"two")

    store_client.delete_state(KEY, second.revision)
    gone = store_client.get_state(KEY, known_revision=second.revision)
    assert (gone.unchanged, gone.value, gone.revision) == (False, b"", 0)


def test_a_written_compare_and_set_is_answered_without_the_value_when_the_caller_asks(
    store_client: StoreClient, store_stub: store_pb2_grpc.SegmentStoreStub
) -> None:
    store_client.create_scope("s")
    value = b"x" * 10_000

    def cas(expected: int, omit: bool) -> pb.CompareAndSetStateResponse:
        request = pb.CompareAndSetStateRequest(
            key=KEY, expected_revision=expected, value=value, omit_written_value=omit
        )
        return store_stub.CompareAndSetState(request)

    written = cas(0, omit=True)
    assert (written.written, written.current.unchanged) == (True, True)
    assert (written.current.value, written.current.revision) == (b"", 1)
    refused = cas(0, omit=True)  # not written: the value stored comes, whatever was asked
    assert (refused.written, refused.current.unchanged) == (False, False)
    assert (refused.current.value, refused.current.revision) == (value, 1)
    older = cas(1, omit=False)  # an older client: the value comes back
    assert (older.written, older.current.value, older.current.revision) == (True, value, 2)

    done, current = store_client.compare_and_set_state(KEY, 2, b"three")  # asks without it
    assert (done, current.value, current.revision, current.unchanged) == (True, b"three", 3, False)
