"""Reader groups whose state lives in the store.

A group's record (its :class:`GroupState`, which reader holds which segment,
reader leases, a pending checkpoint) is one durable value in the store,
updated with compare-and-set on its revision, so concurrent readers never
lose each other's updates. Leases run on the store's clock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from connector.client.connection import StoreClient
from connector.client.serializers import Serializer
from connector.errors import FailedPreconditionError, InvalidArgumentError, TidemarkError
from connector.names import StreamId, validate_name
from connector.reader.events import ReaderConfig
from connector.reader.group_state import GroupState, group_watermark, stream_cut
from connector.reader.planning import StartPosition, start_state

__all__ = [
    "GroupRecord",
    "ReaderGroup",
    "ReaderGroupManager",
    "ReaderGroupResetError",
    "StartAt",
]

#: Where a group starts: a StartPosition, or the words and cuts StartPosition.of takes.
StartAt = StartPosition | Literal["earliest", "latest", "head", "tail"] | Mapping[str, int]

_CAS_ATTEMPTS = 200


class ReaderGroupResetError(TidemarkError):
    """The group was reset or deleted; readers from before must be recreated."""


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
        """The stored form."""
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
        return sorted(s for s, r in self.assignments.items() if r == reader_id)


def _state_key(scope: str, group: str) -> str:
    return f"readergroup/{scope}/{group}"


class ReaderGroupManager:
    """Creates and opens reader groups over the streams of one store."""

    def __init__(self, client: StoreClient):
        self._client = client

    def create_reader_group(
        self,
        scope: str,
        group: str,
        streams: Sequence[str],
        start: StartAt = "head",
        end: Mapping[str, int] | None = None,
    ) -> ReaderGroup:
        """Creates ``scope/group`` reading ``streams`` from ``start`` up to ``end``.

        Raises:
            AlreadyExistsError-like FailedPreconditionError: the group exists.
        """
        validate_name("scope", scope)
        validate_name("reader group", group)
        if not streams:
            msg = f"reader group {group!r} needs at least one stream"
            raise InvalidArgumentError(msg)
        names = tuple(str(StreamId.parse(s)) for s in streams)
        record = GroupRecord(names, 1, initial_state(self._client, names, start, end))
        key = _state_key(scope, group)
        written, _ = self._client.compare_and_set_state(key, 0, record.to_json())
        if not written:
            msg = f"reader group {scope}/{group} already exists"
            raise FailedPreconditionError(msg)
        return ReaderGroup(self._client, scope, group)

    def get_reader_group(self, scope: str, group: str) -> ReaderGroup:
        """Opens an existing group; raises NotFoundError-like FailedPreconditionError if absent."""
        handle = ReaderGroup(self._client, scope, group)
        handle.record()
        return handle

    def __repr__(self) -> str:
        return f"ReaderGroupManager({self._client!r})"


def initial_state(
    client: StoreClient,
    streams: Sequence[str],
    start: StartAt,
    end: Mapping[str, int] | None = None,
) -> GroupState:
    """The state of a group starting at ``start``: see :func:`planning.start_state`."""
    return start_state(client, streams, start, end)


class ReaderGroup:
    """A handle on one reader group: readers, checkpoints, resets, its watermark."""

    def __init__(self, client: StoreClient, scope: str, group: str):
        self._client = client
        self.scope = scope
        self.name = group
        self._key = _state_key(scope, group)

    def record(self) -> GroupRecord:
        """The group's record as stored now."""
        value = self._client.get_state(self._key)
        if value.revision == 0:
            msg = f"reader group {self.scope}/{self.name} does not exist"
            raise ReaderGroupResetError(msg)
        return GroupRecord.from_json(value.value)

    def update(self, change: Callable[[GroupRecord, int], GroupRecord]) -> GroupRecord:
        """Applies ``change(record, store_time_ms)`` atomically and returns the stored result.

        ``change`` may run several times (on concurrent updates) and must be pure.
        When it changes nothing, nothing is written.
        """
        for _ in range(_CAS_ATTEMPTS):
            current = self._client.get_state(self._key)
            if current.revision == 0:
                msg = f"reader group {self.scope}/{self.name} does not exist"
                raise ReaderGroupResetError(msg)
            record = GroupRecord.from_json(current.value)
            updated = change(record, current.server_time)
            if updated == record:
                return record  # nothing to write: keep the journal from growing
            written, _ = self._client.compare_and_set_state(
                self._key, current.revision, updated.to_json()
            )
            if written:
                return updated
        msg = f"reader group {self.scope}/{self.name}: {_CAS_ATTEMPTS} conflicting updates in a row"
        raise FailedPreconditionError(msg)

    def create_reader(
        self,
        reader_id: str,
        serializer: Serializer[Any],
        config: ReaderConfig | None = None,
        *,
        lease_ms: int = 30_000,
        sync_interval_ms: int = 100,
    ) -> Any:
        """A reader joining this group under ``reader_id``; see :class:`EventReader`."""
        from connector.reader.reader import EventReader

        return EventReader(
            self,
            reader_id,
            serializer,
            config or ReaderConfig(),
            lease_ms=lease_ms,
            sync_interval_ms=sync_interval_ms,
        )

    def group_watermark(self) -> int:
        """The minimum watermark over every unfinished segment, as last reported by the readers."""
        return group_watermark(self.record().state)

    def initiate_checkpoint(self, name: str, timeout_s: float = 30.0) -> dict[str, int]:
        """A consistent stream cut, once every reader has reported its position.

        Every event before the cut was returned by some reader before that
        reader acknowledged the checkpoint; none after it was. Blocks up to
        ``timeout_s``; readers acknowledge while they read.
        """

        def request(record: GroupRecord, _now: int) -> GroupRecord:
            if record.checkpoint is not None:
                msg = f"checkpoint {record.checkpoint!r} is still in progress"
                raise FailedPreconditionError(msg)
            return replace(record, checkpoint=name, checkpoint_pending=frozenset(record.leases))

        self.update(request)
        deadline = time.monotonic() + timeout_s
        while True:
            record = self.record()
            if not record.checkpoint_pending or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if record.checkpoint_pending:
            self.update(lambda r, _now: replace(r, checkpoint=None, checkpoint_pending=frozenset()))
            msg = (
                f"checkpoint {name!r} timed out after {timeout_s}s waiting for readers "
                f"{sorted(record.checkpoint_pending)!r}"
            )
            raise FailedPreconditionError(msg)

        def complete(record: GroupRecord, _now: int) -> GroupRecord:
            cut = stream_cut(record.state)
            return replace(
                record,
                checkpoint=None,
                checkpoint_pending=frozenset(),
                checkpoints={**record.checkpoints, name: cut},
            )

        return dict(self.update(complete).checkpoints[name])

    def reset_to(self, cut: StartAt) -> None:
        """Restarts the group from ``cut`` (a checkpoint's cut, head or tail).

        Readers created before the reset fail with ReaderGroupResetError on
        their next read: their watermarks stay ascending, new readers start a
        new sequence.
        """
        record = self.record()
        state = initial_state(self._client, record.streams, cut, record.state.end_cut)
        self.update(
            lambda r, _now: GroupRecord(
                r.streams, r.generation + 1, state, checkpoints=r.checkpoints
            )
        )

    def __repr__(self) -> str:
        return f"ReaderGroup({self.scope!r}, {self.name!r})"
