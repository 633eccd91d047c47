"""The catalog bucket: which scopes exist, and which JetStream stream each stream name has now.

A key per scope (``scope.<hex>``) and per stream (``stream.<hex scope>.<hex
stream>``, whose value names the stream's UID, see :mod:`.naming`). Every
change is a compare-and-set on the key's revision, so of two servers making
the same scope or stream one wins and the other answers ALREADY_EXISTS; a
deletion is conditional on the revision the deleting server checked. Reads
go to the bucket's leader (the bucket is made without direct gets), so a
server that did not make a stream still finds it the moment it exists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from connector.store.jetstream.engine import Engine, WrongLastSequence
from connector.store.jetstream.naming import (
    catalog_bucket,
    decode_name,
    scope_key,
    stream_key,
    stream_key_prefix,
)

__all__ = ["CatalogBucket", "StreamRef"]


@dataclass(frozen=True)
class StreamRef:
    """A stream name's current JetStream stream: its UID, and the key's revision."""

    scope: str
    stream: str
    uid: str
    revision: int


class CatalogBucket:
    """The catalog of one namespace, over an engine (every method runs on the engine's loop)."""

    def __init__(self, engine: Engine, namespace: str):
        self._engine = engine
        self.bucket = catalog_bucket(namespace)

    async def ensure(self, replicas: int) -> None:
        """Makes the bucket unless it exists."""
        await self._engine.ensure_bucket(self.bucket, replicas)

    async def has_scope(self, scope: str) -> bool:
        """Whether ``scope`` exists (asked of the leader)."""
        return await self._engine.kv_get(self.bucket, scope_key(scope)) is not None

    async def scope_revision(self, scope: str) -> int | None:
        """The revision of ``scope``'s key; None when there is no such scope."""
        found = await self._engine.kv_get(self.bucket, scope_key(scope))
        return None if found is None else found[1]

    async def delete_scope(self, scope: str, revision: int) -> bool:
        """Deletes ``scope``'s key if it still has ``revision``; returns whether it did."""
        try:
            await self._engine.kv_delete(self.bucket, scope_key(scope), revision)
        except WrongLastSequence:
            return False
        return True

    async def create_scope(self, scope: str, token: str) -> bool:
        """Makes ``scope``; returns False when it exists already.

        ``token`` tells a repeat of this creation, whose answer was lost, from
        another server's: the repeat finds its own token and counts as made.
        """
        value = json.dumps({"token": token}).encode()
        try:
            await self._engine.kv_create(self.bucket, scope_key(scope), value)
        except WrongLastSequence:
            found = await self._engine.kv_get(self.bucket, scope_key(scope))
            return found is not None and json.loads(found[0] or b"{}").get("token") == token
        return True

    async def stream(self, scope: str, stream: str) -> StreamRef | None:
        """The stream's current UID (asked of the leader); None when there is no such stream."""
        found = await self._engine.kv_get(self.bucket, stream_key(scope, stream))
        if found is None:
            return None
        value, revision = found
        return StreamRef(scope, stream, json.loads(value)["uid"], revision)

    async def create_stream(self, scope: str, stream: str, uid: str) -> StreamRef | None:
        """Names ``uid`` the stream ``scope/stream``; None when the name is taken.

        A repeat of a creation whose answer was lost finds its own UID there
        and counts as made.
        """
        key = stream_key(scope, stream)
        value = json.dumps({"uid": uid}).encode()
        try:
            revision = await self._engine.kv_create(self.bucket, key, value)
        except WrongLastSequence:
            current = await self.stream(scope, stream)
            return current if current is not None and current.uid == uid else None
        return StreamRef(scope, stream, uid, revision)

    async def delete_stream(self, ref: StreamRef) -> bool:
        """Deletes the name if it still has ``ref``'s revision; returns whether it did."""
        try:
            key = stream_key(ref.scope, ref.stream)
            await self._engine.kv_delete(self.bucket, key, ref.revision)
        except WrongLastSequence:
            return False
        return True

    async def scopes(self) -> list[str]:
        """Every scope, sorted."""
        keys = await self._engine.kv_keys(self.bucket, "scope.*")
        return sorted(decode_name(key.partition(".")[2]) for key in keys)

    async def stream_names(self, scope: str) -> list[str]:
        """The streams of ``scope``, sorted."""
        prefix = stream_key_prefix(scope)
        keys = await self._engine.kv_keys(self.bucket, f"{prefix}*")
        return sorted(decode_name(key[len(prefix) :]) for key in keys)

    @staticmethod
    def parse_stream_key(key: str) -> tuple[str, str] | None:
        """``(scope, stream)`` of a stream key; None for another key."""
        parts = key.split(".")
        if len(parts) != 3 or parts[0] != "stream":
            return None
        return decode_name(parts[1]), decode_name(parts[2])
