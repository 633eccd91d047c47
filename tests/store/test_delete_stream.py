"""Deleting a stream: only a sealed one, its data gone, the name free again, across a restart."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest

from connector import StoreClient
from connector.errors import FailedPreconditionError, NotFoundError
from connector.framing import iter_frames

pytestmark = pytest.mark.storages("file", "jetstream")


def _payloads(client: StoreClient, segment: str) -> list[bytes]:
    result = client.read(segment, 0, max_bytes=1 << 20)
    return [frame.payload for frame in iter_frames(result.data)]


def test_a_sealed_stream_is_deleted_with_its_data_and_its_name_reused(
    spawn_server: Callable[..., object], data_dir: pathlib.Path
) -> None:
    server = spawn_server(data_dir)
    with StoreClient(server.uri) as client:
        client.create_scope("d")
        client.create_stream("d", "gone", 2)
        client.create_stream("d", "kept", 1)
        client.append("d/gone/0", "w", 0, [b"old"])
        client.append("d/kept/0", "w", 0, [b"kept"])
        with pytest.raises(FailedPreconditionError, match="not sealed"):
            client.delete_stream("d", "gone")
        client.seal_stream("d", "gone")
        client.delete_stream("d", "gone")
        with pytest.raises(NotFoundError):
            client.describe_stream("d", "gone")
        with pytest.raises(NotFoundError):
            client.read("d/gone/0", 0)
        with pytest.raises(NotFoundError):
            client.delete_stream("d", "gone")
        assert not (data_dir / "segments" / "d" / "gone").exists()
        client.create_stream("d", "gone", 1)
        client.append("d/gone/0", "w", 0, [b"new"])
    server.process.kill()
    server.process.wait(timeout=10)

    restarted = spawn_server(data_dir)
    with StoreClient(restarted.uri) as client:
        assert len(client.describe_stream("d", "gone").segments) == 1
        assert _payloads(client, "d/gone/0") == [b"new"]
        assert _payloads(client, "d/kept/0") == [b"kept"]
