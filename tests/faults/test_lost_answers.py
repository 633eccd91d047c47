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

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager, WriterConfig
from connector.client.serializers import BytesSerializer
from connector.errors import DuplicateEventNumbersError, StoreUnavailableError
from tests.client.answer_dropping_proxy import AnswerDroppingProxy, Loss
from tests.store import payloads, read_frames

pytestmark = [pytest.mark.slow, pytest.mark.storages("file", "jetstream")]

SEGMENT = "f/s/0"


@pytest.fixture
def server(tmp_path, spawn_server):
    server = spawn_server(tmp_path / "data")
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("f")
        StreamManager(client).create_stream("f", "s", segment_count=1)
        StreamManager(client).create_stream("f", "two", segment_count=2)
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
    direct.append(SEGMENT, "shared", 4, [b"theirs 4"])
    writer.write_event(b"mine 4", routing_key="k")
    with pytest.raises(DuplicateEventNumbersError):  # and again: its place is known
        writer.flush()


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


# --- every way a call is lost, every way the writer goes on ----------------------------

LOSSES = list(Loss)
KEYS = ["a", "b", "c", "d"]


class _Events:
    """Numbered events of :data:`KEYS` written to stream f/two, and what was written."""

    def __init__(self, writer: EventWriter[bytes]):
        self.writer = writer
        self.count = 0

    def write(self, tag: str, count: int = 12) -> list[tuple[str, bytes]]:
        written = []
        for _ in range(count):
            key = KEYS[self.count % len(KEYS)]
            written.append((key, f"{tag}-{self.count}".encode()))
            self.writer.write_event(written[-1][1], routing_key=key)
            self.count += 1
        return written


def _by_key(events: list[tuple[str, bytes]]) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = {}
    for key, payload in events:
        found.setdefault(key, []).append(payload)
    return found


def _stored(direct: StoreClient) -> dict[str, list[bytes]]:
    """Every event of stream f/two by routing key, in stored order."""
    segments = [s.segment for s in direct.describe_stream("f", "two").segments]
    return _by_key(
        [(frame.routing_key, frame.payload) for s in segments for frame in read_frames(direct, s)]
    )


def _release_late_copies(proxy: AnswerDroppingProxy, wait_until) -> None:
    proxy.release()
    held = proxy.dropped.count("AppendEvents")
    wait_until(lambda: len(proxy.delivered_late) == held, timeout=30, what="the late copies")


@pytest.mark.parametrize("loss", LOSSES, ids=[loss.value for loss in LOSSES])
def test_a_lost_append_is_resent_by_the_client_and_stored_once(proxied, direct, wait_until, loss):
    client, proxy = proxied(retry_timeout_s=10.0, call_timeout_s=0.5)
    events = _Events(EventWriter(client, "f/two", BytesSerializer()))
    written = events.write("before")
    events.writer.flush()
    proxy.lose("AppendEvents", times=1, loss=loss)
    written += events.write("lost")
    events.writer.flush()  # resent within the client's retry budget
    assert proxy.dropped == ["AppendEvents"]
    if loss is Loss.HELD:
        _release_late_copies(proxy, wait_until)  # the first copy arrives after its resend
    events.writer.close()
    assert _stored(direct) == _by_key(written)


@pytest.mark.parametrize("loss", LOSSES, ids=[loss.value for loss in LOSSES])
def test_a_flush_that_failed_is_retried_by_the_next_flush_and_stored_once(
    proxied, direct, wait_until, loss
):
    client, proxy = proxied(retry_timeout_s=1.0, call_timeout_s=0.5)
    events = _Events(EventWriter(client, "f/two", BytesSerializer()))
    written = events.write("before")
    events.writer.flush()
    proxy.lose("AppendEvents", times=None, loss=loss)
    batch = events.write("lost")
    with pytest.raises(StoreUnavailableError):
        events.writer.flush()
    assert events.writer.pending_events == len(batch)
    proxy.heal()
    if loss is Loss.HELD:
        _release_late_copies(proxy, wait_until)  # stored before the next flush resends them
    events.writer.flush()
    written += batch + events.write("after")
    events.writer.close()
    assert _stored(direct) == _by_key(written)


@pytest.mark.parametrize("loss", LOSSES, ids=[loss.value for loss in LOSSES])
def test_after_discard_pending_the_next_events_are_stored_once_and_the_dropped_at_most_once(
    proxied, direct, wait_until, loss
):
    client, proxy = proxied(retry_timeout_s=1.0, call_timeout_s=0.5)
    events = _Events(EventWriter(client, "f/two", BytesSerializer()))
    written = events.write("before")
    events.writer.flush()
    proxy.lose("AppendEvents", times=None, loss=loss)
    dropped = events.write("dropped")
    with pytest.raises(StoreUnavailableError):
        events.writer.flush()
    assert events.writer.discard_pending() == len(dropped)
    proxy.heal()
    after = events.write("after")
    events.writer.flush()
    if loss is Loss.HELD:
        _release_late_copies(proxy, wait_until)  # too late: the next batches fenced them off
    events.writer.close()
    stored, before, lost, later = (
        _stored(direct),
        _by_key(written),
        _by_key(dropped),
        _by_key(after),
    )
    # Per key: the dropped events are there once, in place, or not at all (a batch is
    # stored whole or not; flush() stops at the first batch it could not send).
    kept = {key for key in KEYS if stored[key] == before[key] + lost[key] + later[key]}
    assert {key for key in KEYS if stored[key] == before[key] + later[key]} == set(KEYS) - kept
    # The lost answers' changes were made; the lost requests and late copies never were.
    assert bool(kept) == (loss in (Loss.ANSWER, Loss.CONNECTION))


@pytest.mark.parametrize("loss", LOSSES, ids=[loss.value for loss in LOSSES])
def test_a_close_that_failed_keeps_the_events_and_the_next_close_stores_them_once(
    proxied, direct, wait_until, loss
):
    client, proxy = proxied(retry_timeout_s=1.0, call_timeout_s=0.5)
    events = _Events(EventWriter(client, "f/two", BytesSerializer()))
    written = events.write("before")
    events.writer.flush()
    proxy.lose("AppendEvents", times=None, loss=loss)
    written += events.write("lost")
    with pytest.raises(StoreUnavailableError):
        events.writer.close()
    proxy.heal()
    events.writer.close()
    events.writer.close()  # closing twice is harmless
    if loss is Loss.HELD:
        _release_late_copies(proxy, wait_until)  # after the resend: duplicates, skipped
    assert _stored(direct) == _by_key(written)


def test_a_discarded_batch_arriving_late_never_lands_after_the_writers_next_assertion(
    proxied, direct, wait_until
):
    """An assertion closes the gap of discarded numbers: no late copy can break its promise."""
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
    assert writer.note_time(1_000).stored
    proxy.release()
    wait_until(lambda: len(proxy.delivered_late) == held, timeout=30, what="the late copies")
    assert payloads(direct, SEGMENT) == [b"0"]
    writer.write_event(b"3", routing_key="k")
    writer.flush()
    assert payloads(direct, SEGMENT) == [b"0", b"3"]
    assert direct.segment_info(SEGMENT).event_time_watermark == 1_000


@pytest.mark.parametrize("riding", [True, False], ids=["riding", "alone"])
def test_an_assertion_whose_answer_was_lost_is_resent_by_the_next_flush_and_stored_once(
    proxied, direct, riding
):
    """Its duplicate answer is the writer's own send, not another writer with its id."""
    client, proxy = proxied(retry_timeout_s=1.0, call_timeout_s=0.5)
    writer = EventWriter(client, "f/s", BytesSerializer())
    writer.write_event(b"0", routing_key="k")
    assert writer.note_time(500).stored
    if riding:
        writer.write_event(b"1", routing_key="k")
    proxy.lose("AppendEvents" if riding else "AssertWatermark", times=None, loss=Loss.ANSWER)
    with pytest.raises(StoreUnavailableError):
        writer.note_time(1_000)
    assert direct.segment_info(SEGMENT).event_time_watermark == 1_000  # stored, unacknowledged
    proxy.heal()
    writer.flush()  # sends it again with its number: a duplicate, and this writer's own
    writer.write_event(b"2", routing_key="k")
    assert writer.note_time(2_000).stored
    writer.close()
    assert payloads(direct, SEGMENT) == [b"0", b"1", b"2"] if riding else [b"0", b"2"]
    assert direct.segment_info(SEGMENT).writers == ()  # closed: idle


def test_a_writers_join_whose_answer_was_lost_is_resent_with_its_events_and_joins_once(
    proxied, direct
):
    """The first append of an asserting writer carries its join: resent, all of it is its own."""
    client, proxy = proxied(retry_timeout_s=1.0, call_timeout_s=0.5)
    config = WriterConfig(assert_watermarks_from="ts")
    writer = EventWriter(client, "f/s", JsonSerializer(), config=config)
    writer.write_event({"ts": 1_000}, routing_key="k")
    writer.write_event({"ts": 2_000}, routing_key="k")
    proxy.lose("AppendEvents", times=None, loss=Loss.ANSWER)
    with pytest.raises(StoreUnavailableError):
        writer.flush()
    stored = direct.read(SEGMENT, 0)  # all of it stored, unacknowledged
    assert (stored.event_time_floor, stored.event_time_watermark) == (999, 1_999)
    proxy.heal()
    writer.flush()  # sent again with their numbers: duplicates, and this writer's own
    writer.write_event({"ts": 3_000}, routing_key="k")
    writer.flush()
    assert writer.late_events == 0
    assert payloads(direct, SEGMENT) == [b'{"ts":1000}', b'{"ts":2000}', b'{"ts":3000}']
    assert direct.segment_info(SEGMENT).event_time_watermark == 2_999
    writer.close()
