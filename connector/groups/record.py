"""A reader group's record as the store keeps it: one JSON value under a state key.

A standalone reader group keeps everything its readers share in the store
(:class:`GroupRecord`, under :func:`state_key`); the reader core changes it
(:mod:`connector.reader.membership`), the server's metrics read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from connector.groups.compact import columns_of, compact_state, read_state
from connector.groups.state import GroupState

__all__ = ["STATE_KEY_PREFIX", "GroupRecord", "state_key"]

#: Where reader groups keep their records: ``readergroup/scope/group``.
STATE_KEY_PREFIX = "readergroup/"

#: The ``form`` of records in the compact form; records stored before it have none.
_COMPACT = 2


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
        """The stored form: compact JSON, keys sorted (read by :meth:`from_json` from now on).

        The state is in its compact form (:mod:`connector.groups.compact`),
        and the assignments are a column beside it: each readable segment's
        reader, as its place in a list of the readers.
        """
        return json.dumps(
            {
                "form": _COMPACT,
                "streams": list(self.streams),
                "generation": self.generation,
                "state": compact_state(self.state),
                "assigned": self._assigned(),
                "leases": dict(self.leases),
                "checkpoint": self.checkpoint,
                "checkpoint_pending": sorted(self.checkpoint_pending),
                "checkpoints": {k: dict(v) for k, v in self.checkpoints.items()},
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode()

    def _assigned(self) -> dict[str, Any]:
        """The assignments as the stored form keeps them.

        ``readers``, sorted; ``holders``: each readable segment's reader (its
        place in ``readers``, null for none), in the state's columns' order;
        ``others``: segments assigned but not readable, if any.
        """
        assignments = self.assignments
        readers = sorted(set(assignments.values()))
        place = {reader: at for at, reader in enumerate(readers)}
        names = columns_of(self.state).names
        holders = list(map(place.get, map(assignments.get, names)))
        assigned: dict[str, Any] = {"readers": readers, "holders": holders}
        if len(names) - holders.count(None) < len(assignments):
            readable = self.state.cursors
            assigned["others"] = {s: r for s, r in assignments.items() if s not in readable}
        return assigned

    @classmethod
    def from_json(cls, data: bytes, previous: GroupRecord | None = None) -> GroupRecord:
        """Reads :meth:`to_json`'s output, and the forms stored by older releases.

        The cursors equal to ``previous``'s (the record the caller held
        before) are ``previous``'s objects.
        """
        raw = json.loads(data)
        state = read_state(raw["state"], None if previous is None else previous.state)
        if raw.get("form") == _COMPACT:
            assignments = _assignments(raw["assigned"], columns_of(state).names)
        else:
            assignments = raw["assignments"]
        return cls(
            streams=tuple(raw["streams"]),
            generation=raw["generation"],
            state=state,
            assignments=assignments,
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


def _assignments(assigned: Mapping[str, Any], names: Sequence[str]) -> dict[str, str]:
    """The assignments of :meth:`GroupRecord._assigned`'s form, over the state's ``names``."""
    readers, holders = assigned["readers"], assigned["holders"]
    if None in holders:
        pairs = zip(names, holders, strict=True)
        found = {name: readers[at] for name, at in pairs if at is not None}
    else:
        found = dict(zip(names, map(readers.__getitem__, holders), strict=True))
    found.update(assigned.get("others", {}))
    return found
