"""StoreServer: where it listens, and what it does when it cannot."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest

from connector._wire import MAX_MESSAGE_BYTES, MAX_READ_BYTES
from connector.client import StoreClient
from connector.errors import InvalidArgumentError
from connector.server import StoreServer
from connector.store import StoreConfig
from tests.conftest import new_stream_in
from tests.store import payloads


def test_a_second_server_cannot_listen_on_an_address_already_served(
    start_store: Callable[..., StoreServer], tmp_path: pathlib.Path
) -> None:
    first = start_store()
    with StoreClient(first.uri, retry_timeout_s=2.0) as client:
        segment = f"{new_stream_in(client)}/0"
        client.append(segment, "w", 0, [b"mine"])

        with pytest.raises(InvalidArgumentError, match=f"cannot listen on '{first.address}'"):
            start_store(listen=first.address, data_dir=str(tmp_path / "other"))

        for _ in range(20):  # every new connection still reaches the first store
            with StoreClient(first.uri, retry_timeout_s=2.0) as fresh:
                assert payloads(fresh, segment) == [b"mine"]


@pytest.mark.slow
def test_a_read_asking_more_than_a_message_holds_is_answered_in_parts(
    start_store: Callable[..., StoreServer],
) -> None:
    server = start_store()
    event = bytes(1024 * 1024 - 64)  # under the default 1 MiB event limit
    count = MAX_MESSAGE_BYTES // len(event) + 4  # more than one gRPC message can carry
    with StoreClient(server.uri, retry_timeout_s=5.0) as client:
        segment = f"{new_stream_in(client)}/0"
        for number in range(0, count, 8):
            batch = [event] * min(8, count - number)
            client.append(segment, "w", number, batch)

        first = client.read(segment, 0, max_bytes=4 * MAX_MESSAGE_BYTES)
        assert 0 < len(first.data) <= MAX_READ_BYTES
        assert first.next_offset == len(first.data)
        assert payloads(client, segment) == [event] * count


def test_a_store_whose_events_could_outgrow_a_read_answer_is_not_served(
    tmp_path: pathlib.Path,
) -> None:
    config = StoreConfig(data_dir=str(tmp_path), max_event_size=MAX_READ_BYTES + 1)
    with pytest.raises(InvalidArgumentError, match=f"max_event_size must be <= {MAX_READ_BYTES}"):
        StoreServer(config)
