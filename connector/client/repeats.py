"""Whether a change repeated after a lost answer had already been made.

A client that loses the answer to a change (the server went away, the call's
deadline passed) cannot tell whether the store made it, so it sends the
change again. Appends are deduplicated by the store itself (writer id and
event number); the other changes are not, and a repeat of one that was made
fails: the scope or stream "already exists", the segment "is sealed already",
the compare-and-set finds the revision moved on. Each function here decides,
from what the store holds now, whether that state is exactly what the change
asked for, in which case the repeat counts as the change's success; for a
state value, also whether it proves the change was not made (else its
outcome is unknown: :mod:`connector.revisions`).

Another client making the very same change in the same window is
indistinguishable from the lost answer, and leaves the same state: the
caller gets what it asked for either way.
"""

from __future__ import annotations

from collections.abc import Sequence

from connector.model import SegmentDescription, StateValue, StreamDescription
from connector.names import SegmentId
from connector.revisions import left_by, untouched

__all__ = ["scale_made", "seal_made", "state_untouched", "state_written", "stream_created"]


def stream_created(description: StreamDescription, segment_count: int) -> bool:
    """Whether the stream is as a creation of ``segment_count`` segments left it.

    Nothing has happened to it since: epoch 0, not sealed, exactly
    ``segment_count`` segments covering the key space ``[0, 1)``.
    """
    segments = sorted(description.segments, key=lambda s: s.key_low)
    return (
        description.epoch == 0
        and not description.sealed
        and len(segments) == segment_count
        and _covers(segments, 0.0, 1.0)
    )


def scale_made(
    description: StreamDescription, sealed_segments: Sequence[int], split_count: int
) -> bool:
    """Whether a scale sealing ``sealed_segments`` into ``split_count`` successors was made.

    Every named segment is sealed, and they share one set of successors
    whose predecessors are exactly the named segments, ``split_count`` of
    them for a split (0 means a merge: one), covering the named segments'
    key range.
    """
    names = {str(SegmentId(description.scope, description.stream, n)) for n in sealed_segments}
    sealed = [s for s in description.segments if s.segment in names]
    if len(sealed) != len(names) or not all(s.sealed for s in sealed):
        return False
    successor_sets = {s.successors for s in sealed}
    if len(successor_sets) != 1:
        return False
    [successor_names] = successor_sets
    successors = sorted(
        (s for s in description.segments if s.segment in set(successor_names)),
        key=lambda s: s.key_low,
    )
    expected_count = split_count if split_count else 1
    low = min(s.key_low for s in sealed)
    high = max(s.key_high for s in sealed)
    return (
        len(successors) == expected_count == len(successor_names)
        and all(set(s.predecessors) == names for s in successors)
        and _covers(successors, low, high)
    )


def seal_made(description: StreamDescription) -> bool:
    """Whether the stream is sealed (a seal leaves nothing else to compare)."""
    return description.sealed


def state_written(current: StateValue, expected_revision: int, value: bytes) -> bool:
    """Whether ``current`` is what a compare-and-set of ``value`` at ``expected_revision`` left."""
    # (A value stored again after a deletion goes on from the deleted one's revisions, so the
    # repeat of such a first write whose answer was lost is not recognised: unknown.)
    return left_by(current.revision, current.value, expected_revision, value)


def state_untouched(current: StateValue, expected_revision: int) -> bool:
    """Whether ``current`` proves a change of the value at ``expected_revision`` was not made."""
    return untouched(current.revision, expected_revision)


def _covers(segments: Sequence[SegmentDescription], low: float, high: float) -> bool:
    """Whether ``segments`` (sorted by ``key_low``) tile ``[low, high)`` without gap or overlap."""
    if not segments or segments[0].key_low != low or segments[-1].key_high != high:
        return False
    return all(a.key_high == b.key_low for a, b in zip(segments, segments[1:], strict=False))
