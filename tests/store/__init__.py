"""Tests of the store's front on both storages; helpers the store, server and client tests share."""

from __future__ import annotations

from connector.client import StoreClient
from connector.framing import Frame, encode_frames, iter_frames


def read_frames(client: StoreClient, segment: str, offset: int = 0) -> list[Frame]:
    """Every event of ``segment`` from ``offset`` to its committed end, decoded and verified."""
    end = client.segment_info(segment).write_offset
    frames: list[Frame] = []
    while offset < end:
        result = client.read(segment, offset, max_bytes=1024 * 1024)
        assert result.next_offset > offset, f"read of {segment!r} at {offset} made no progress"
        frames.extend(iter_frames(result.data, base_offset=offset))
        offset = result.next_offset
    return frames


def payloads(client: StoreClient, segment: str) -> list[bytes]:
    """The payloads of every event of ``segment``, in order."""
    return [frame.payload for frame in read_frames(client, segment)]


def frame_size(payload: bytes) -> int:
    """How many bytes one event with ``payload`` (and no routing key) takes in a segment."""
    return len(encode_frames([payload], 0))
