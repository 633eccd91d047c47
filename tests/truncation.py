"""A stream whose first data was truncated away: what "earliest" must read after it.

Shared by the tests of every entry point that resolves a start position
(reader groups, the CLI, Spark, Flink).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.names import SegmentId


def truncate_at_tail(client: StoreClient, scope: str, stream: str) -> None:
    """Truncates everything ``scope/stream`` holds now: its newest segments at their tails."""
    newest = [s for s in client.describe_stream(scope, stream).segments if not s.successors]
    cut = {
        SegmentId.parse(s.segment).number: client.segment_info(s.segment).write_offset
        for s in newest
    }
    client.truncate_stream(scope, stream, cut)


def truncated_stream(
    client: StoreClient,
    scope: str,
    stream: str = "s",
    truncate: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Creates ``scope/stream``, truncates its first events away, and writes more after them.

    The stream starts with one segment; 4 events go there, then it is split
    in two and 4 more go to the successors; then everything is truncated
    (``truncate()``, by default :func:`truncate_at_tail`), so the first
    segment's data is gone whole and each successor's first readable offset
    is its tail; then 6 events go to the successors. Returns those 6, the
    only events an "earliest" read can and must return.
    """
    StreamManager(client).create_scope(scope)
    client.create_stream(scope, stream, 1)
    name = f"{scope}/{stream}"
    _write(client, name, [{"n": n, "kept": False} for n in range(4)])
    client.scale_stream(scope, stream, [0], split_count=2)
    _write(client, name, [{"n": n, "kept": False} for n in range(4, 8)])
    (truncate or (lambda: truncate_at_tail(client, scope, stream)))()
    kept = [{"n": n, "kept": True} for n in range(8, 14)]
    _write(client, name, kept)
    return kept


def _write(client: StoreClient, stream: str, events: list[dict[str, Any]]) -> None:
    with EventWriter(client, stream, JsonSerializer()) as writer:
        for event in events:
            writer.write_event(event, routing_key=f"k{event['n'] % 4}")
