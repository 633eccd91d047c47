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
