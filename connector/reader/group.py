"""Reader groups whose state lives in the store.

A group's record (:class:`~connector.reader.GroupRecord`: its
:class:`GroupState`, which reader holds which segment, reader leases, a
pending checkpoint) is one durable value in the store, updated with
compare-and-set on its revision, so concurrent readers never lose each
other's updates. The rules that change it are the pure functions of
:mod:`connector.reader.membership`; leases run on the store's clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, TypeVar

from connector.client.connection import StoreClient
from connector.client.serializers import Serializer
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
)
from connector.groups.record import GroupRecord, state_key
from connector.groups.state import GroupState, group_watermark
from connector.model import StateValue
from connector.names import StreamId, validate_name
from connector.reader.events import ReaderConfig
from connector.reader.membership import (
    ReaderGroupResetError,
    cancel_checkpoint,
    complete_checkpoint,
    request_checkpoint,
    reset,
)
from connector.reader.reader import EventReader
from connector.reader.source.cuts import StreamCut, start_state
from connector.reader.sync_pace import DEFAULT_MAX_IDLE_SYNC_INTERVAL_MS

__all__ = [
    "ReaderGroup",
    "ReaderGroupManager",
    "ReaderGroupResetError",
    "StartAt",
]

T = TypeVar("T")

#: Where a group starts: a StreamCut, or the words and cuts StreamCut.of takes.
StartAt = StreamCut | Literal["earliest", "latest", "head", "tail"] | Mapping[str, int]

_CAS_ATTEMPTS = 200


class ReaderGroupManager:
    """Creates and opens reader groups over the streams of one store."""

    def __init__(self, client: StoreClient):
        self._client = client

    def create_reader_group(
        self,
        scope: str,
        group: str,
        streams: Sequence[str],
        start: StartAt = "earliest",
        end: Mapping[str, int] | None = None,
    ) -> ReaderGroup:
        """Creates ``scope/group`` reading ``streams`` from ``start`` up to stream cut ``end``.

        Raises:
            AlreadyExistsError: the group exists.
            InvalidArgumentError: a bad name, no stream, or a cut naming a
                segment the streams do not have.
            NotFoundError: a stream does not exist.
        """
        validate_name("scope", scope)
        validate_name("reader group", group)
        if not streams:
            msg = f"reader group {group!r} needs at least one stream"
            raise InvalidArgumentError(msg)
        names = tuple(str(StreamId.parse(s)) for s in streams)
        record = GroupRecord(names, 1, start_state(self._client, names, start, end))
        written, _ = self._client.compare_and_set_state(
            state_key(scope, group), 0, record.to_json()
        )
        if not written:
            msg = f"reader group {scope}/{group} already exists"
            raise AlreadyExistsError(msg)
        return ReaderGroup(self._client, scope, group)

    def delete_reader_group(self, scope: str, group: str) -> None:
        """Deletes ``scope/group``: its state goes, its readers fail on their next update.

        They fail with ReaderGroupResetError, as after a reset; a group
        created later under the same name starts afresh.

        Raises:
            NotFoundError: there is no group ``scope/group``.
            FailedPreconditionError: too many concurrent updates in a row.
        """
        key = state_key(scope, group)
        for _ in range(_CAS_ATTEMPTS):
            current = self._client.get_state(key)
            if current.revision == 0:
                msg = f"reader group {scope}/{group} does not exist"
                raise NotFoundError(msg)
            deleted, _ = self._client.delete_state(key, current.revision)
            if deleted:
                return
        msg = f"reader group {scope}/{group}: {_CAS_ATTEMPTS} conflicting updates in a row"
        raise FailedPreconditionError(msg)

    def publish_position(
        self, scope: str, group: str, streams: Sequence[str], state: GroupState
    ) -> bool:
        """Stores ``state`` as the position of group ``scope/group``, which no reader joins.

        For a host that keeps its position itself (a Spark query in its
        checkpoint): published after each batch, its lag and watermark show
        where a reader group's do, in ``tidemarkctl readergroup describe``,
        ``tidemarkctl watermarks --group`` and the store's metrics
        (``tidemark_reader_group_unread_events``...), counted by the same rule
        (:func:`connector.groups.lag.group_lag`). The group is created on the
        first call; each call replaces the position. Returns whether it was
        written (False: a group of that name has readers, and is left alone).
        Needs ``read`` on ``scope``, like any reader group.

        Raises:
            InvalidArgumentError: a bad name.
            FailedPreconditionError: too many concurrent updates in a row.
        """
        validate_name("scope", scope)
        validate_name("reader group", group)
        key = state_key(scope, group)
        names = tuple(str(StreamId.parse(s)) for s in streams)
        for _ in range(_CAS_ATTEMPTS):
            current = self._client.get_state(key)
            generation = 1
            if current.revision:
                known = GroupRecord.from_json(current.value)
                if known.leases or known.assignments:
                    return False
                if known.state == state and known.streams == names:
                    return True
                generation = known.generation
            record = GroupRecord(names, generation, state)
            try:
                written, _ = self._client.compare_and_set_state(
                    key, current.revision, record.to_json()
                )
            except OutcomeUnknownError:
                continue  # looked at again: the position stored, or not
            if written:
                return True
        msg = f"reader group {scope}/{group}: {_CAS_ATTEMPTS} conflicting updates in a row"
        raise FailedPreconditionError(msg)

    def list_reader_groups(self, scope: str) -> list[str]:
        """The names of the reader groups of ``scope``, sorted (NotFoundError: no such scope)."""
        self._client.list_streams(scope)  # refuses a scope that does not exist, naming it
        prefix = state_key(scope, "")
        return [key.removeprefix(prefix) for key in self._client.list_state_keys(prefix)]

    def get_reader_group(self, scope: str, group: str) -> ReaderGroup:
        """Opens an existing group.

        Raises:
            NotFoundError: there is no group ``scope/group``.
        """
        handle = ReaderGroup(self._client, scope, group)
        try:
            handle.record()
        except ReaderGroupResetError:
            msg = f"reader group {scope}/{group} does not exist"
            raise NotFoundError(msg) from None
        return handle

    def __repr__(self) -> str:
        return f"ReaderGroupManager({self._client!r})"


class ReaderGroup:
    """A handle on one reader group: readers, checkpoints, resets, its watermark."""

    def __init__(self, client: StoreClient, scope: str, group: str):
        self._client = client
        self.scope = scope
        self.name = group
        self._key = state_key(scope, group)
        # The record last read or written, with its revision and stored form: parsed once.
        self._known: tuple[int, bytes, GroupRecord] | None = None

    @property
    def client(self) -> StoreClient:
        """The store client this handle (and the readers it creates) use."""
        return self._client

    def record(self) -> GroupRecord:
        """The group's record as stored now.

        Raises:
            ReaderGroupResetError: the group does not exist (or no longer).
        """
        _, record = self._current()
        if record is None:
            msg = f"reader group {self.scope}/{self.name} does not exist"
            raise ReaderGroupResetError(msg)
        return record

    def update(self, change: Callable[[GroupRecord, int], GroupRecord]) -> GroupRecord:
        """Applies ``change(record, store_time_ms)`` atomically and returns the stored result.

        ``change`` may run several times (on concurrent updates, or after an
        update whose outcome was lost and cannot be told) and must be pure.
        When it changes nothing, nothing is written.

        Raises:
            ReaderGroupResetError: the group does not exist (or no longer).
            FailedPreconditionError: too many concurrent updates in a row.
        """
        for _ in range(_CAS_ATTEMPTS):
            current, record = self._current()
            if record is None:
                msg = f"reader group {self.scope}/{self.name} does not exist"
                raise ReaderGroupResetError(msg)
            updated = change(record, current.server_time)
            if updated == record:
                return record  # nothing to write: keep the journal from growing
            value = updated.to_json()
            try:
                written, stored = self._client.compare_and_set_state(
                    self._key, current.revision, value
                )
            except OutcomeUnknownError:
                continue  # written, then changed again, or not: ``change`` runs on what is there
            if written:
                self._known = (stored.revision, value, updated)
                return updated
        msg = f"reader group {self.scope}/{self.name}: {_CAS_ATTEMPTS} conflicting updates in a row"
        raise FailedPreconditionError(msg)

    def _current(self) -> tuple[StateValue, GroupRecord | None]:
        """The value stored now and its record (None: no group), parsed only when new.

        A sync that finds the record as this handle last read or wrote it
        (the usual case for an idle group) moves none of its bytes (the
        store answers ``unchanged``) and parses nothing. Records are values:
        nothing changes one in place, so the one kept is handed out again,
        and a new one keeps its cursor objects where they did not change.
        """
        known = self._known  # once: readers in other threads may replace it meanwhile
        stored = self._client.get_state(self._key, None if known is None else known[0])
        if stored.revision == 0:
            return stored, None
        if known is not None and known[0] == stored.revision:
            if stored.unchanged or known[1] == stored.value:
                return stored, known[2]
        record = GroupRecord.from_json(stored.value, None if known is None else known[2])
        self._known = (stored.revision, stored.value, record)
        return stored, record

    def create_reader(
        self,
        reader_id: str,
        serializer: Serializer[T],
        config: ReaderConfig | None = None,
        *,
        lease_ms: int = 30_000,
        sync_interval_ms: int = 100,
        max_idle_sync_interval_ms: int = DEFAULT_MAX_IDLE_SYNC_INTERVAL_MS,
    ) -> EventReader[T]:
        """A reader joining this group under ``reader_id``; see :class:`EventReader`.

        It syncs with the group every ``sync_interval_ms`` while anything
        moves, and while idle less often, down to once every
        ``max_idle_sync_interval_ms`` (see :mod:`connector.reader.sync_pace`).

        Joining writes the group's state: on a full disk it fails with
        ResourceExhaustedError (readers already in the group read on).
        """
        return EventReader(
            self,
            reader_id,
            serializer,
            config or ReaderConfig(),
            lease_ms=lease_ms,
            sync_interval_ms=sync_interval_ms,
            max_idle_sync_interval_ms=max_idle_sync_interval_ms,
        )

    def group_watermark(self) -> int:
        """The minimum watermark over every unfinished segment, as last reported by the readers."""
        return group_watermark(self.record().state)

    def initiate_checkpoint(self, name: str, timeout_s: float = 30.0) -> dict[str, int]:
        """A consistent stream cut, once every reader has reported its position.

        Every event before the cut was returned by some reader before that
        reader acknowledged the checkpoint; none after it was. Blocks up to
        ``timeout_s``; readers acknowledge while they read.

        Raises:
            FailedPreconditionError: another checkpoint is in progress, or
                the readers did not all acknowledge within ``timeout_s``.
        """
        self.update(lambda r, now: request_checkpoint(r, name, now))
        deadline = time.monotonic() + timeout_s
        while True:
            record = self.record()
            if not record.checkpoint_pending or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if record.checkpoint_pending:
            self.update(cancel_checkpoint)
            msg = (
                f"checkpoint {name!r} timed out after {timeout_s}s waiting for readers "
                f"{sorted(record.checkpoint_pending)!r}"
            )
            raise FailedPreconditionError(msg)
        completed = self.update(lambda r, now: complete_checkpoint(r, name, now))
        return dict(completed.checkpoints[name])

    def reset_to(self, cut: StartAt) -> None:
        """Restarts the group from ``cut`` (a checkpoint's cut, or a start position).

        Readers created before the reset fail with ReaderGroupResetError on
        their next read: their watermarks stay ascending, new readers start a
        new sequence.
        """
        record = self.record()
        state = start_state(self._client, record.streams, cut, record.state.end_cut)
        self.update(lambda r, now: reset(r, state, now))

    def __repr__(self) -> str:
        return f"ReaderGroup({self.scope!r}, {self.name!r})"
