"""State values (reader groups) in a key-value bucket, with the revisions Tidemark promises.

Tidemark's revisions count a key's writes (1, 2, 3, ...: a client that lost
an answer checks ``revision == expected + 1``) and go on past a deleted
value's, while a bucket's revisions are stream sequences. So each value
carries its own revision in its first 8 bytes (a deletion's marker carries
the deleted value's), and a compare-and-set is two compare-and-sets:
Tidemark's revision against the caller's, and the bucket's (the one read)
against the bucket, so a write between the read and the update fails it.
Reads go to the bucket's leader.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from connector.store.jetstream.engine import Engine, WrongLastSequence
from connector.store.jetstream.naming import decode_name, state_bucket, state_key

__all__ = ["StateBucket", "StoredState"]

_REVISION = struct.Struct(">Q")


class StoredState(NamedTuple):
    """A key's value and revision (0: none), the bucket's revision of it, and the last one given."""

    value: bytes
    revision: int
    bucket_revision: int
    last_revision: int


class StateBucket:
    """The state values of one namespace, over an engine (every method runs on its loop)."""

    def __init__(self, engine: Engine, namespace: str):
        self._engine = engine
        self.bucket = state_bucket(namespace)

    async def ensure(self, replicas: int) -> None:
        """Makes the bucket unless it exists."""
        await self._engine.ensure_bucket(self.bucket, replicas)

    async def get(self, key: str) -> StoredState:
        """What ``key`` holds now (asked of the bucket's leader)."""
        message = await self._engine.kv_entry(self.bucket, state_key(key))
        if message is None:
            return StoredState(b"", 0, 0, 0)
        (revision,) = _REVISION.unpack_from(message.data) if message.data else (0,)
        if self._engine.is_deletion(message):
            return StoredState(b"", 0, message.seq, revision)
        return StoredState(message.data[_REVISION.size :], revision, message.seq, revision)

    async def compare_and_set(self, key: str, expected_revision: int, value: bytes) -> bool:
        """Stores ``value`` if ``key``'s revision is ``expected_revision``; returns whether so."""
        current = await self.get(key)
        if current.revision != expected_revision:
            return False
        stored = _REVISION.pack(current.last_revision + 1) + value
        try:
            if current.revision == 0:
                await self._engine.kv_create(
                    self.bucket, state_key(key), stored, current.bucket_revision
                )
            else:
                await self._engine.kv_update(
                    self.bucket, state_key(key), stored, current.bucket_revision
                )
        except WrongLastSequence:
            return False
        return True

    async def delete(self, key: str, expected_revision: int) -> bool:
        """Deletes ``key``'s value if its revision is ``expected_revision``; returns whether so."""
        current = await self.get(key)
        if current.revision == 0 or current.revision != expected_revision:
            return False
        marker = _REVISION.pack(current.revision)
        try:
            await self._engine.kv_delete(
                self.bucket, state_key(key), current.bucket_revision, marker
            )
        except WrongLastSequence:
            return False
        return True

    async def keys(self, prefix: str) -> list[str]:
        """The state keys holding a value and starting with ``prefix``, sorted."""
        keys = await self._engine.kv_keys(self.bucket, "s.*")
        names = (decode_name(key.partition(".")[2]) for key in keys)
        return sorted(name for name in names if name.startswith(prefix))
