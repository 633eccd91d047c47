"""Which segments a stream cut leaves wholly behind it (truncation)."""

from __future__ import annotations

from collections.abc import Mapping

from connector.store.published import PublishedSegment

__all__ = ["wholly_before"]


def wholly_before(
    segments: Mapping[int, PublishedSegment], cut: Mapping[int, int]
) -> tuple[int, ...]:
    """The numbers of the segments wholly before ``cut`` (segment number -> offset), sorted.

    A segment is wholly before the cut when it is sealed, not in the cut,
    and every one of its successors is in the cut or wholly before it: then
    for every routing key of its range the cut lies after all of its data.
    A segment without successors (open, or sealed with its stream) is never.
    """
    by_name = {segment.name: number for number, segment in segments.items()}
    before: set[int] = set()
    # Successors have higher numbers than their predecessors: decide them first.
    for number in sorted(segments, reverse=True):
        segment = segments[number]
        if number in cut or not segment.pending_sealed or not segment.successors:
            continue
        successors = [by_name[name] for name in segment.successors]
        if all(s in cut or s in before for s in successors):
            before.add(number)
    return tuple(sorted(before))
