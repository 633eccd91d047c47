"""A reader group's record as the store keeps it: one JSON value under a state key.

A standalone reader group keeps everything its readers share in the store
(:class:`GroupRecord`, under :func:`state_key`); the reader core changes it
(:mod:`connector.reader.membership`), the server's metrics read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from connector.groups.state import GroupState

__all__ = ["STATE_KEY_PREFIX", "GroupRecord", "state_key"]

#: Where reader groups keep their records: ``readergroup/scope/group``.
STATE_KEY_PREFIX = "readergroup/"


def state_key(scope: str, group: str) -> str:
    """The state key of group ``group`` of ``scope`` (``group`` empty: the scope's prefix)."""
    return f"{STATE_KEY_PREFIX}{scope}/{group}"


@dataclass(frozen=True)
class GroupRecord:
    """Everything a group shares, stored as one JSON value."""

    streams: tuple[str, ...]
    generation: int
    state: GroupState
    assignments: Mapping[str, str] = field(default_factory=dict)
    leases: Mapping[str, int] = field(default_factory=dict)
    checkpoint: str | None = None
    checkpoint_pending: frozenset[str] = frozenset()
    checkpoints: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The stored form: compact JSON, keys sorted (read by :meth:`from_json` of any release)."""
        return json.dumps(
            {
                "streams": list(self.streams),
                "generation": self.generation,
                "state": self.state.to_dict(),
                "assignments": dict(self.assignments),
                "leases": dict(self.leases),
                "checkpoint": self.checkpoint,
                "checkpoint_pending": sorted(self.checkpoint_pending),
                "checkpoints": {k: dict(v) for k, v in self.checkpoints.items()},
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> GroupRecord:
        """Reads :meth:`to_json`'s output."""
        raw = json.loads(data)
        return cls(
            streams=tuple(raw["streams"]),
            generation=raw["generation"],
            state=GroupState.from_dict(raw["state"]),
            assignments=raw["assignments"],
            leases=raw["leases"],
            checkpoint=raw["checkpoint"],
            checkpoint_pending=frozenset(raw["checkpoint_pending"]),
            checkpoints=raw["checkpoints"],
        )

    def segments_of(self, reader_id: str) -> list[str]:
        """The segments ``reader_id`` holds."""
        return sorted(self.holdings.get(reader_id, ()))

    @cached_property
    def holdings(self) -> Mapping[str, frozenset[str]]:
        """The segments each reader holds: worked out once per record (records are values)."""
        held: dict[str, set[str]] = {}
        for segment, reader in self.assignments.items():
            held.setdefault(reader, set()).add(segment)
        return {reader: frozenset(segments) for reader, segments in held.items()}
