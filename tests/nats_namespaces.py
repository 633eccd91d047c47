"""Removing what a test's JetStream store made in the shared cluster: its namespace's streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import nats

from connector.store.jetstream.naming import catalog_bucket, state_bucket


def drop_namespace(urls: Sequence[str], namespace: str) -> None:
    """Deletes every JetStream stream and bucket of ``namespace`` (the cluster must be up)."""
    asyncio.run(_drop(list(urls), namespace))


async def _drop(urls: list[str], namespace: str) -> None:
    connection = await nats.connect(urls, connect_timeout=5, max_reconnect_attempts=3)
    try:
        manager = connection.jetstream()
        request = json.dumps({"subject": f"{namespace}.>"}).encode()
        answer = await connection.request("$JS.API.STREAM.NAMES", request, timeout=5)
        streams = json.loads(answer.data).get("streams") or []
        names = [f"KV_{catalog_bucket(namespace)}", f"KV_{state_bucket(namespace)}", *streams]
        for name in names:
            try:
                await manager.delete_stream(name)
            except nats.js.errors.NotFoundError:
                pass
    finally:
        await connection.close()
