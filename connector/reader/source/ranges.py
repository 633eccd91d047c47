"""What lies between two frontiers: byte ranges of whole events, grouped and cut for tasks.

- :func:`ranges_between`: the bytes per segment from one frontier to another;
- :func:`chains_of`: those ranges grouped so that successors follow their
  predecessors (one chain is read in order by one task);
- :func:`split_range`: a range cut into pieces of at most so many events
  and bytes (Beam's ``OffsetRange.split``: the range splits itself; the
  store says where whole events end);
- :func:`read_range`: the store reads that cover a range.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from connector.client.connection import StoreClient
from connector.errors import FailedPreconditionError
from connector.framing import HEADER
from connector.model import ReadResult, SegmentDescription
from connector.names import SegmentId
from connector.reader.source.frontier import Frontier
from connector.reader.source.limits import Budget

__all__ = [
    "READ_CHUNK_BYTES",
    "SegmentRange",
    "chains_of",
    "ranges_between",
    "read_range",
    "segment_order",
    "split_range",
]

#: The most bytes one store read asks for, for readers and tasks alike.
READ_CHUNK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class SegmentRange:
    """Bytes ``[start, stop)`` of ``segment``: whole events."""

    segment: str
    start: int
    stop: int


def ranges_between(start: Frontier, end: Frontier) -> list[SegmentRange]:
    """The bytes a read from frontier ``start`` to frontier ``end`` covers, per segment.

    Ordered by stream, then segment number; segments finished at ``start``
    are left out, segments new since ``start`` are read from offset 0.
    """
    if end is start:
        return []
    ranges = []
    stops = {s: c.offset for s, c in end.state.cursors.items()}
    stops.update({s: o for s, o in end.ends.items() if s in end.state.finished})
    for segment, stop in stops.items():
        if segment in start.state.finished:
            continue
        cursor = start.state.cursors.get(segment)
        begin = cursor.offset if cursor is not None else 0
        if stop > begin:
            ranges.append(SegmentRange(segment, begin, stop))
    ranges.sort(key=lambda r: segment_order(r.segment))  # only the segments that moved
    return ranges


def chains_of(
    by_name: Mapping[str, SegmentDescription], ranges: Sequence[SegmentRange]
) -> list[list[SegmentRange]]:
    """``ranges`` grouped into chains that one task reads in order.

    Ranges of segments related by scaling (predecessor and successor,
    transitively) share a chain, each after its predecessors, so events of
    one routing key are read in the order written; unrelated segments get
    chains of their own and may be read in parallel. ``by_name`` describes
    every segment of ``ranges``.
    """
    parent = {r.segment: r.segment for r in ranges}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    for segment in parent:
        for predecessor in by_name[segment].predecessors:
            if predecessor in parent:
                parent[root(segment)] = root(predecessor)
    chains: dict[str, list[SegmentRange]] = {}
    for segment_range in sorted(ranges, key=lambda r: segment_order(r.segment)):
        chains.setdefault(root(segment_range.segment), []).append(segment_range)
    return list(chains.values())


def split_range(
    client: StoreClient, segment_range: SegmentRange, size: Budget
) -> list[SegmentRange]:
    """``segment_range`` in consecutive pieces of at most ``size``'s events and bytes.

    Whole events only: the store says where each piece ends
    (:meth:`StoreClient.plan_read`, one call per piece, no event read back).
    An event larger than ``size.max_bytes`` is a piece of its own. With no
    limit the range is its only piece.
    """
    length = segment_range.stop - segment_range.start
    # A frame is at least a header long: a short range holds few enough events unasked.
    if size.admits(length // HEADER.size, length):
        return [segment_range]
    pieces = []
    offset, stop = segment_range.start, segment_range.stop
    while offset < stop:
        room = stop - offset if size.max_bytes is None else min(size.max_bytes, stop - offset)
        # At least one event: an event larger than max_bytes is planned alone.
        planned = client.plan_read(segment_range.segment, offset, size.max_events, room)
        end = min(planned.next_offset, stop)
        if end <= offset:
            msg = f"the store holds no event of {segment_range} at offset {offset}"
            raise FailedPreconditionError(msg)
        pieces.append(SegmentRange(segment_range.segment, offset, end))
        offset = end
    return pieces


def read_range(
    client: StoreClient, segment_range: SegmentRange, chunk_bytes: int = READ_CHUNK_BYTES
) -> Iterator[ReadResult]:
    """Reads ``segment_range`` as store reads of at most ``chunk_bytes`` each, in order.

    Each result holds whole events; together they cover the range exactly.
    """
    offset = segment_range.start
    while offset < segment_range.stop:
        result = client.read(
            segment_range.segment, offset, max_bytes=min(chunk_bytes, segment_range.stop - offset)
        )
        yield result
        offset = result.next_offset


def segment_order(name: str) -> tuple[str, int]:
    """Sorts segments by stream, then number."""
    segment = SegmentId.parse(name)
    return str(segment.stream_id), segment.number
