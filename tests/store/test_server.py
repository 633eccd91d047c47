"""StoreServer: where it listens, and what it does when it cannot."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest

from connector.client import StoreClient
from connector.errors import InvalidArgumentError
from connector.server import StoreServer

from . import payloads


def test_a_second_server_cannot_listen_on_an_address_already_served(
    start_store: Callable[..., StoreServer], tmp_path: pathlib.Path
) -> None:
    first = start_store()
    with StoreClient(first.uri, retry_timeout_s=2.0) as client:
        client.create_scope("sc")
        [segment] = client.create_stream("sc", "st", 1).segments
        client.append(segment.segment, "w", 0, [b"mine"])

        with pytest.raises(InvalidArgumentError, match=f"cannot listen on '{first.address}'"):
            start_store(listen=first.address, data_dir=str(tmp_path / "other"))

        for _ in range(20):  # every new connection still reaches the first store
            with StoreClient(first.uri, retry_timeout_s=2.0) as fresh:
                assert payloads(fresh, segment.segment) == [b"mine"]
