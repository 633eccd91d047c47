"""Creating, describing, scaling and sealing streams; creating and deleting scopes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from connector.client.connection import StoreClient
from connector.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from connector.model import StreamDescription
from connector.names import SegmentId, StreamId, validate_name

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

    def delete_scope(self, scope: str, missing_ok: bool = False) -> None:
        """Deletes ``scope``, which must be empty; with ``missing_ok`` a missing one is fine.

        Raises:
            FailedPreconditionError: the scope still has streams (sealed ones
                too) or reader groups; the error names them.
            NotFoundError: there is no such scope (unless ``missing_ok``).
        """
        validate_name("scope", scope)
        try:
            self._client.delete_scope(scope)
        except NotFoundError:
            if not missing_ok:
                raise

    def list_scopes(self) -> list[str]:
        """Every scope, sorted."""
        return self._client.list_scopes()

    def list_streams(self, scope: str) -> list[str]:
        """The streams of ``scope``, sorted, sealed ones too (NotFoundError: no such scope)."""
        validate_name("scope", scope)
        return self._client.list_streams(scope)

    def describe_stream(self, scope: str, stream: str) -> StreamDescription:
        """Every segment the stream ever had."""
        return self._client.describe_stream(scope, stream)

    @overload
    def split_segment(self, segment: str, *, into: int = 2) -> StreamDescription: ...

    @overload
    def split_segment(
        self, scope: str, stream: str, segment: int | str, into: int = 2
    ) -> StreamDescription: ...

    def split_segment(
        self,
        scope_or_segment: str,
        stream: str | None = None,
        segment: int | str | None = None,
        into: int = 2,
    ) -> StreamDescription:
        """Seals a segment and splits its key range into ``into`` (>= 2) successors.

        Name the segment as everywhere else, ``split_segment("scope/stream/N")``;
        the older ``split_segment(scope, stream, N)`` (N a number or the full
        name) still works.

        Raises:
            InvalidArgumentError: a malformed segment name, a name of another
                stream, or ``into`` < 2.
            SegmentSealedError: the segment is sealed already.
            NotFoundError: no such stream or segment.
        """
        [target] = _segments(scope_or_segment, stream, None if segment is None else [segment])
        return self._client.scale_stream(target.scope, target.stream, [target.number], into)

    @overload
    def merge_segments(self, segments: Sequence[str]) -> StreamDescription: ...

    @overload
    def merge_segments(
        self, scope: str, stream: str, segments: Sequence[int | str]
    ) -> StreamDescription: ...

    def merge_segments(
        self,
        scope_or_segments: str | Sequence[str],
        stream: str | None = None,
        segments: Sequence[int | str] | None = None,
    ) -> StreamDescription:
        """Seals adjacent segments of one stream and replaces them with one successor.

        Name the segments as everywhere else,
        ``merge_segments(["scope/stream/3", "scope/stream/1"])``; the older
        ``merge_segments(scope, stream, [3, 1])`` still works.

        Raises:
            InvalidArgumentError: a malformed name, segments of different
                streams, or segments that are not adjacent.
            SegmentSealedError: a segment is sealed already.
            NotFoundError: no such stream or segment.
        """
        if isinstance(scope_or_segments, str) and stream is None:
            msg = (
                f"merge_segments takes a list of segment names, got {scope_or_segments!r}: "
                "write merge_segments(['scope/stream/1', 'scope/stream/2'])"
            )
            raise InvalidArgumentError(msg)
        if isinstance(scope_or_segments, str):
            named = _segments(scope_or_segments, stream, list(segments or ()))
        else:
            named = [SegmentId.parse(name) for name in scope_or_segments]
        streams = {s.stream_id for s in named}
        if len(streams) != 1:
            msg = f"merge_segments needs segments of one stream, got {[str(s) for s in named]!r}"
            raise InvalidArgumentError(msg)
        [stream_id] = streams
        return self._client.scale_stream(
            stream_id.scope, stream_id.stream, [s.number for s in named], 0
        )

    def seal_stream(self, scope: str, stream: str) -> StreamDescription:
        """Seals the stream: no more writes; readers reach its end."""
        return self._client.seal_stream(scope, stream)

    def __repr__(self) -> str:
        return f"StreamManager({self._client!r})"


def _segments(
    scope_or_segment: str, stream: str | None, segments: Sequence[int | str] | None
) -> list[SegmentId]:
    """The segments of ``split_segment`` / ``merge_segments``'s two call forms, as SegmentIds."""
    if stream is None:
        if segments is not None:
            msg = f"give a segment name alone or scope, stream and segment, got {segments!r}"
            raise InvalidArgumentError(msg)
        return [SegmentId.parse(scope_or_segment)]
    if segments is None:
        msg = f"no segment given for stream {scope_or_segment}/{stream}"
        raise InvalidArgumentError(msg)
    expected = StreamId(scope_or_segment, stream)
    named = []
    for segment in segments:
        if isinstance(segment, str):
            parsed = SegmentId.parse(segment)
            if parsed.stream_id != expected:
                msg = f"segment {segment!r} is not in stream {str(expected)!r}"
                raise InvalidArgumentError(msg)
        elif isinstance(segment, int) and not isinstance(segment, bool) and segment >= 0:
            parsed = SegmentId(expected.scope, expected.stream, segment)
        else:
            msg = f"a segment is a name 'scope/stream/N' or a number >= 0, got {segment!r}"
            raise InvalidArgumentError(msg)
        named.append(parsed)
    return named
