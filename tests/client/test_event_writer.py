"""The event writer on a real store: what it tells of its assertions, and a sealed stream."""

from __future__ import annotations

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient
from connector.errors import FailedPreconditionError, InvalidArgumentError
from tests.conftest import new_stream_in


def test_a_writer_tells_its_latest_assertion_whether_the_store_took_it_or_refused_it(
    store_client: StoreClient,
) -> None:
    stream = new_stream_in(store_client)
    first = EventWriter(store_client, stream, JsonSerializer(), writer_id="task")
    assert first.asserted is None
    first.note_time(100)
    assert first.asserted == 100
    # A new incarnation of the id: the store refuses what is below the old one's promise.
    second = EventWriter(store_client, stream, JsonSerializer(), writer_id="task", numbers_from=10)
    with pytest.raises(InvalidArgumentError, match="100"):
        second.note_time(50)
    assert second.asserted == 50  # a sink asks this before asserting: 50 again would gain nothing
    second.mark_idle()
    assert second.asserted == 50  # an idle mark is no event time
    second.note_time(150)
    assert second.asserted == 150


def test_a_sealed_stream_refuses_a_writer_and_its_events_as_a_failed_precondition(
    store_client: StoreClient,
) -> None:
    """A sealed stream raised a bare TidemarkError, which no caller could tell from a failure."""
    stream = new_stream_in(store_client)
    writer = EventWriter(store_client, stream, JsonSerializer())
    writer.write_event({"n": 1})
    store_client.seal_stream(*stream.split("/"))
    with pytest.raises(FailedPreconditionError, match=f"stream {stream!r} is sealed"):
        writer.flush()
    with pytest.raises(FailedPreconditionError, match=f"stream {stream!r} is sealed"):
        EventWriter(store_client, stream, JsonSerializer())
