"""The key ranges of new segments: a stream's first ones, and a scale's successors."""

from __future__ import annotations

from collections.abc import Sequence

from connector.errors import InvalidArgumentError
from connector.store.published import PublishedSegment

__all__ = ["even_ranges", "scale_ranges"]


def even_ranges(low: float, high: float, count: int) -> list[tuple[float, float]]:
    """``[low, high)`` cut into ``count`` ranges of equal width, in order."""
    bounds = [low + (high - low) * i / count for i in range(count)] + [high]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def scale_ranges(
    segments: Sequence[PublishedSegment], split_count: int
) -> list[tuple[float, float]]:
    """The key ranges of the successors of ``segments``.

    One segment with ``split_count`` 2 or more is a split into even ranges
    (the caller bounds it: the stream's limit of open segments); several
    adjacent segments with ``split_count`` 0 are a merge into one.

    Raises:
        InvalidArgumentError: naming what is wrong with the request.
    """
    if len(segments) == 1:
        if split_count < 2:
            msg = f"a split needs split_count 2 or more, got {split_count!r}"
            raise InvalidArgumentError(msg)
        return even_ranges(segments[0].key_low, segments[0].key_high, split_count)
    if len(segments) < 1:
        msg = "a scale needs at least one segment to seal"
        raise InvalidArgumentError(msg)
    if split_count != 0:
        msg = f"a merge of {len(segments)} segments takes split_count 0, got {split_count!r}"
        raise InvalidArgumentError(msg)
    ordered = sorted(segments, key=lambda s: s.key_low)
    if len({s.number for s in ordered}) != len(ordered):
        msg = f"a merge names a segment twice: {[s.number for s in segments]!r}"
        raise InvalidArgumentError(msg)
    for left, right in zip(ordered, ordered[1:], strict=False):
        if left.key_high != right.key_low:
            msg = f"segments {left.name!r} and {right.name!r} are not adjacent and cannot merge"
            raise InvalidArgumentError(msg)
    return [(ordered[0].key_low, ordered[-1].key_high)]
