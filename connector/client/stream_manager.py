"""Creating, describing, scaling and sealing streams."""

from __future__ import annotations

from collections.abc import Sequence

from connector.client.connection import StoreClient
from connector.errors import AlreadyExistsError
from connector.model import StreamDescription
from connector.names import validate_name

__all__ = ["StreamManager"]


class StreamManager:
    """Administers the streams of one store; cheap, shares the client's channel."""

    def __init__(self, client: StoreClient):
        self._client = client

    def create_scope(self, scope: str, exist_ok: bool = False) -> None:
        """Creates ``scope``; with ``exist_ok`` an existing one is fine."""
        validate_name("scope", scope)
        try:
            self._client.create_scope(scope)
        except AlreadyExistsError:
            if not exist_ok:
                raise

    def create_stream(
        self, scope: str, stream: str, segment_count: int = 1, exist_ok: bool = False
    ) -> StreamDescription:
        """Creates ``scope/stream`` with ``segment_count`` segments; returns its description."""
        validate_name("scope", scope)
        validate_name("stream", stream)
        try:
            return self._client.create_stream(scope, stream, segment_count)
        except AlreadyExistsError:
            if not exist_ok:
                raise
            return self._client.describe_stream(scope, stream)

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """Every segment the stream ever had."""
        return self._client.describe_stream(scope, stream)

    def split_segment(
        self, scope: str, stream: str, segment: int, into: int = 2
    ) -> StreamDescription:
        """Seals segment number ``segment`` and splits its key range into ``into`` successors."""
        return self._client.scale_stream(scope, stream, [segment], into)

    def merge_segments(self, scope: str, stream: str, segments: Sequence[int]) -> StreamDescription:
        """Seals adjacent segments and replaces them with one successor."""
        return self._client.scale_stream(scope, stream, list(segments), 0)

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals the stream: no more writes; readers reach its end."""
        return self._client.seal_stream(scope, stream)

    def __repr__(self) -> str:
        return f"StreamManager({self._client!r})"
