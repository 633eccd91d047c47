"""The writer never loses events silently: a batch the store refuses stays queued or is named."""

from __future__ import annotations

import pytest

from connector import EventWriter, StoreClient, StreamManager
from connector.client.serializers import BytesSerializer
from connector.errors import ResourceExhaustedError
from connector.framing import iter_frames

pytestmark = pytest.mark.storages("file", "jetstream")


def _stored(client: StoreClient) -> list[bytes]:
    return [f.payload for f in iter_frames(client.read("r/s/0", 0, 1 << 20).data)]


@pytest.fixture
def client(start_store):
    server = start_store(max_event_size=1_000)
    with StoreClient(server.uri, retry_timeout_s=1.0) as client:
        StreamManager(client).create_scope("r")
        StreamManager(client).create_stream("r", "s", segment_count=1)
        yield client


def test_a_refused_batch_is_not_dropped_silently_and_flush_raises_again(client):
    writer = EventWriter(client, "r/s", BytesSerializer())
    for n in range(5):
        writer.write_event(b"valid %d" % n, routing_key="k")
    writer.write_event(b"x" * 5_000, routing_key="k")
    with pytest.raises(ResourceExhaustedError, match="6 event\\(s\\) to 'r/s/0' were not stored"):
        writer.flush()
    assert writer.pending_events == 6
    with pytest.raises(ResourceExhaustedError):  # a second flush does not pretend all is well
        writer.flush()
    assert _stored(client) == []

    assert writer.discard_pending() == 6  # dropped on purpose, and counted
    writer.write_event(b"after", routing_key="k")
    assert "r/s/0" in writer.flush()
    assert _stored(client) == [b"after"]


def test_flush_reports_the_ingestion_time_of_what_it_stored(client):
    with EventWriter(client, "r/s", BytesSerializer()) as writer:
        writer.write_event(b"one", routing_key="k")
        times = writer.flush()
        assert times == {"r/s/0": client.segment_info("r/s/0").last_write_time}
        assert writer.flush() == {}
