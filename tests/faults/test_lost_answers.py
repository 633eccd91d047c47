"""The writer behind a proxy that loses requests and answers: every event stored exactly once.

A real store server process; between it and the writer's client an
:class:`AnswerDroppingProxy` loses AppendEvents calls in each way a client
can stop hearing of a call (the request lost, the answer lost, the
connection cut after the store made the change, the request delivered after
the caller gave up). Whatever is lost, an acknowledged event is stored once,
in order, and an event the writer discarded is never stored in its place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from connector import EventWriter, StoreClient, StreamManager
from connector.client.serializers import BytesSerializer
from connector.errors import DuplicateEventNumbersError, StoreUnavailableError
from tests.client.answer_dropping_proxy import AnswerDroppingProxy, Loss
from tests.store import payloads

SEGMENT = "f/s/0"


@pytest.fixture
def server(tmp_path, spawn_server):
    server = spawn_server(tmp_path / "data")
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("f")
        StreamManager(client).create_stream("f", "s", segment_count=1)
    return server


@pytest.fixture
def direct(server) -> Iterator[StoreClient]:
    """A client straight to the server, for checking what it stored."""
    with StoreClient(server.uri) as client:
        yield client


@pytest.fixture
def proxied(server) -> Iterator[Callable[..., tuple[StoreClient, AnswerDroppingProxy]]]:
    """``proxied(**client_settings)``: a client whose calls go through a fresh proxy."""
    opened: list[tuple[StoreClient, AnswerDroppingProxy]] = []

    def open_client(**settings: float) -> tuple[StoreClient, AnswerDroppingProxy]:
        proxy = AnswerDroppingProxy(server.address)
        client = StoreClient(proxy.uri, **settings)
        opened.append((client, proxy))
        return client, proxy

    yield open_client
    for client, proxy in opened:
        client.close()
        proxy.close()


def test_events_written_after_a_discarded_batch_whose_answers_were_lost_are_stored(proxied, direct):
    """Issue 21, finding 1: events 3 and 4 reused the discarded batch's numbers and vanished."""
    client, proxy = proxied(retry_timeout_s=2.0, call_timeout_s=1.0)
    writer = EventWriter(client, "f/s", BytesSerializer())
    writer.write_event(b"0", routing_key="k")
    writer.flush()
    proxy.lose("AppendEvents", times=None, loss=Loss.ANSWER)
    writer.write_event(b"1", routing_key="k")
    writer.write_event(b"2", routing_key="k")
    with pytest.raises(StoreUnavailableError):
        writer.flush()
    assert payloads(direct, SEGMENT) == [b"0", b"1", b"2"]  # applied, though unacknowledged
    assert writer.discard_pending() == 2
    proxy.heal()
    writer.write_event(b"3", routing_key="k")
    writer.write_event(b"4", routing_key="k")
    writer.flush()
    assert payloads(direct, SEGMENT) == [b"0", b"1", b"2", b"3", b"4"]


def test_events_the_store_calls_duplicates_but_the_writer_never_stored_are_an_error(direct):
    """Another writer with the same id took the numbers: the writer says so instead of success."""
    writer = EventWriter(direct, "f/s", BytesSerializer(), writer_id="shared")
    writer.write_event(b"mine 0", routing_key="k")
    writer.flush()
    direct.append(SEGMENT, "shared", 1, [b"theirs 1", b"theirs 2"])
    writer.write_event(b"mine 1", routing_key="k")
    writer.write_event(b"mine 2", routing_key="k")
    writer.write_event(b"mine 3", routing_key="k")
    with pytest.raises(DuplicateEventNumbersError) as refused:
        writer.flush()
    assert refused.value.events == (b"mine 1", b"mine 2")
    assert refused.value.first_event_number == 1
    assert "2 event(s)" in str(refused.value) and "1 to 2" in str(refused.value)
    assert payloads(direct, SEGMENT) == [b"mine 0", b"theirs 1", b"theirs 2", b"mine 3"]
    assert writer.pending_events == 0  # named in the error, not queued to fail again


@pytest.mark.parametrize("released", ["before the next batch", "after the next batch"])
def test_a_discarded_batch_arriving_late_is_stored_only_before_the_next_batch(
    proxied, direct, wait_until, released
):
    client, proxy = proxied(retry_timeout_s=2.0, call_timeout_s=0.5)
    writer = EventWriter(client, "f/s", BytesSerializer())
    writer.write_event(b"0", routing_key="k")
    writer.flush()
    proxy.lose("AppendEvents", times=None, loss=Loss.HELD)  # every copy outlives its deadline
    writer.write_event(b"1", routing_key="k")
    writer.write_event(b"2", routing_key="k")
    with pytest.raises(StoreUnavailableError):
        writer.flush()
    assert writer.discard_pending() == 2
    proxy.heal()
    held = len(proxy.dropped)

    def release() -> None:
        proxy.release()
        wait_until(lambda: len(proxy.delivered_late) == held, timeout=30, what="the late copies")

    if released == "before the next batch":
        release()
    writer.write_event(b"3", routing_key="k")
    writer.write_event(b"4", routing_key="k")
    writer.flush()
    if released == "after the next batch":
        release()
        assert payloads(direct, SEGMENT) == [b"0", b"3", b"4"]
    else:
        assert payloads(direct, SEGMENT) == [b"0", b"1", b"2", b"3", b"4"]
