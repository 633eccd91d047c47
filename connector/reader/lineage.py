"""Segment lineage as readers need it: the streams' descriptions, successors, ancestors."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence

from connector.client.connection import StoreClient
from connector.errors import InvalidArgumentError
from connector.groups.state import Successor
from connector.model import SegmentDescription, StreamDescription
from connector.names import SegmentId, StreamId

__all__ = ["KnownSegments", "ancestors", "describe_streams", "lineage_lane", "successors_of"]


def describe_streams(
    client: StoreClient, streams: Iterable[str | StreamId]
) -> list[StreamDescription]:
    """The description of each stream, ``scope/stream`` or a StreamId, in order."""
    ids = [s if isinstance(s, StreamId) else StreamId.parse(s) for s in streams]
    return [client.describe_stream(i.scope, i.stream) for i in ids]


class KnownSegments:
    """The descriptions of the segments a planner met, each stream described once per new segment.

    A segment's predecessors never change, so what :func:`ancestors`,
    :func:`lineage_lane` and lineage chains read of it stays true: a planner
    that plans again and again asks the store only when a segment is new to it.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, SegmentDescription] = {}

    def covering(
        self, client: StoreClient, segments: Iterable[str]
    ) -> Mapping[str, SegmentDescription]:
        """Descriptions by name, with every one of ``segments`` and its streams' other segments."""
        new = {SegmentId.parse(s).stream_id for s in segments if s not in self._by_name}
        for description in describe_streams(client, sorted(new, key=str)):
            self._by_name.update((s.segment, s) for s in description.segments)
        return self._by_name


def successors_of(client: StoreClient, segment: str, names: Sequence[str]) -> list[Successor]:
    """What :func:`~connector.groups.state.finish` needs of successors ``names``.

    ``names`` are the successors of ``segment``.
    """
    if not names:
        return []
    stream = SegmentId.parse(segment).stream_id
    description = client.describe_stream(stream.scope, stream.stream)
    return [
        Successor(d.segment, d.predecessors, d.creation_time)
        for d in map(description.segment, names)
    ]


def ancestors(by_name: Mapping[str, SegmentDescription], segments: Iterable[str]) -> set[str]:
    """Every segment that precedes one of ``segments``, transitively, and is not among them.

    Raises:
        InvalidArgumentError: ``segments`` names one ``by_name`` does not have.
    """
    cut = set(segments)
    unknown = sorted(cut - set(by_name))
    if unknown:
        msg = f"stream cut names segments {unknown!r} that the streams do not have"
        raise InvalidArgumentError(msg)
    seen: set[str] = set()
    todo = [p for name in cut for p in by_name[name].predecessors]
    while todo:
        name = todo.pop()
        if name not in seen and name not in cut:
            seen.add(name)
            todo.extend(by_name[name].predecessors)
    return seen


def lineage_lane(by_name: Mapping[str, SegmentDescription], segment: str) -> int:
    """A number that ``segment`` shares with every segment of its lineage, at any time.

    It is the lineage's oldest segment (the lowest number among ``segment``
    and its ancestors) and its stream, folded into one int that stays the
    same across processes. Work split by lane (``lane % workers``) keeps one
    lineage on one worker: successors after a split, and after a merge of
    segments that share an ancestor, go where their predecessors went.
    """
    oldest = min(
        {segment} | ancestors(by_name, [segment]), key=lambda name: SegmentId.parse(name).number
    )
    parsed = SegmentId.parse(oldest)
    return zlib.crc32(str(parsed.stream_id).encode()) + parsed.number
