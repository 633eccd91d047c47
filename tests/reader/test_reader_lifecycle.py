"""A reader's life over a real store server: finishing, closing, closing again after a failure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.errors import AlreadyExistsError, ClosedError, NotFoundError, StoreUnavailableError
from connector.reader import END_OF_TIME, ReaderConfig, ReaderGroupManager, TimeDomain
from tests.conftest import wait_until
from tests.reader.conftest import ReadLog, drain, read_some

INGESTION = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)


def write(client: StoreClient, stream: str, clock: ManualClock, count: int) -> None:
    with EventWriter(client, stream, JsonSerializer()) as writer:
        for n in range(count):
            writer.write_event({"n": n}, routing_key=f"k{n}")
            clock.advance(5)


def reachable(client: StoreClient) -> bool:
    try:
        client.describe_stream("rt", "events")
    except StoreUnavailableError:
        return False
    return True


@pytest.mark.parametrize("config", [ReaderConfig(), INGESTION], ids=["processing", "ingestion"])
def test_a_reader_says_when_a_bounded_group_is_finished_rather_than_timed_out(
    store_client: StoreClient, new_stream: Callable[[int], str], clock: ManualClock, config: Any
) -> None:
    stream = new_stream(1)
    write(store_client, stream, clock, 3)
    segment = f"{stream}/0"
    end = {segment: store_client.segment_info(segment).write_offset}
    manager = ReaderGroupManager(store_client)
    bounded = manager.create_reader_group(
        "rt", f"fin-{config.time_domain.value}", [stream], end=end
    )
    unbounded = manager.create_reader_group("rt", f"open-{config.time_domain.value}", [stream])
    with bounded.create_reader("r", JsonSerializer(), config) as reader:
        assert not reader.is_finished
        log = ReadLog()
        drain([(reader, log)], expected=3)
        read_some(reader, log, 5, timeout_ms=20)
        assert reader.read_next_event(10) is None
        assert reader.is_finished
        if config is INGESTION:
            assert log.watermarks[-1] == END_OF_TIME
    with unbounded.create_reader("r", JsonSerializer(), config) as reader:
        drain([(reader, ReadLog())], expected=3)
        assert reader.read_next_event(10) is None  # a timeout: more may come
        assert not reader.is_finished


def test_a_closed_reader_and_a_closed_writer_raise_the_same_error(
    store_client: StoreClient, new_stream: Callable[[int], str]
) -> None:
    stream = new_stream(1)
    group = ReaderGroupManager(store_client).create_reader_group("rt", "closed", [stream])
    reader = group.create_reader("r", JsonSerializer())
    reader.close()
    reader.close()  # harmless
    with pytest.raises(ClosedError, match="'r' is closed"):
        reader.read_next_event(10)
    writer = EventWriter(store_client, stream, JsonSerializer())
    writer.close()
    with pytest.raises(ClosedError, match="is closed"):
        writer.write_event({"n": 1})


def test_reader_groups_raise_the_projects_exists_and_not_found_errors(
    store_client: StoreClient, new_stream: Callable[[int], str]
) -> None:
    stream = new_stream(1)
    manager = ReaderGroupManager(store_client)
    created = manager.create_reader_group("rt", "once", [stream])
    with pytest.raises(AlreadyExistsError, match="rt/once already exists"):
        manager.create_reader_group("rt", "once", [stream])
    assert manager.get_reader_group("rt", "once").record() == created.record()
    with pytest.raises(NotFoundError, match="rt/never does not exist"):
        manager.get_reader_group("rt", "never")


def test_close_can_be_retried_after_the_store_was_unreachable(
    start_store: Callable[..., Any], clock: ManualClock
) -> None:
    """A failed close used to mark the reader closed: the group kept its lease and segments."""
    server = start_store()
    address = server.address
    with StoreClient(server.uri, retry_timeout_s=0.3) as client:
        manager = StreamManager(client)
        manager.create_scope("rt")
        manager.create_stream("rt", "events", 2)
        group = ReaderGroupManager(client).create_reader_group("rt", "retry", ["rt/events"])
        reader = group.create_reader("r", JsonSerializer(), lease_ms=600_000)
        assert len(reader.segments) == 2
        server.stop(grace_s=0.1)
        with pytest.raises(StoreUnavailableError):
            reader.close()
        start_store(listen=address)
        wait_until(lambda: reachable(client), timeout=15.0, what="the restarted store")
        reader.close()
        record = group.record()
        assert record.leases == {} and record.assignments == {}
        with group.create_reader("next", JsonSerializer(), lease_ms=600_000) as successor:
            assert len(successor.segments) == 2
        with pytest.raises(ClosedError):
            reader.read_next_event(10)
