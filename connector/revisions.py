"""What a key's revision proves about a compare-and-set or a deletion whose answer was lost.

A state value's revision counts its key's writes (1, 2, 3, ...) and goes on
past a deleted value's, so it only rises: a compare-and-set expecting
revision r leaves r + 1, and whatever comes after it more. From what the key
holds now, a change whose answer was lost was made (the key holds exactly
what it left), was not made (:func:`untouched`), or cannot be told: the key
has moved on since, or is gone, and the only true answer is that its outcome
is unknown (UNAVAILABLE), never "not written".
"""

from __future__ import annotations

__all__ = ["left_by", "unknown_outcome", "untouched"]


def left_by(revision: int, stored: bytes, expected_revision: int, value: bytes) -> bool:
    """Whether a key at ``revision`` holding ``stored`` is what a compare-and-set left.

    The compare-and-set of ``value`` at ``expected_revision``: exactly the
    next revision, as a later one may be another writer's.
    """
    return revision == expected_revision + 1 and stored == value


def untouched(revision: int, expected_revision: int) -> bool:
    """Whether a key at ``revision`` proves no change expecting ``expected_revision`` was made.

    It holds a value (revision above 0) at a revision no later than that:
    a write or a deletion of revision ``expected_revision`` would have left
    a later one.
    """
    return 0 < revision <= expected_revision


def unknown_outcome(change: str, key: str, expected_revision: int, revision: int) -> str:
    """Says that ``change`` of state ``key`` at ``expected_revision`` may or may not be made."""
    return (
        f"{change} of state {key!r} at revision {expected_revision}: its answer was lost, and "
        f"the value has changed since (revision {revision}): whether it was made is unknown"
    )
