"""The payloads of recent messages a server keeps for reads, bounded in bytes."""

from __future__ import annotations

import collections
import threading

__all__ = ["PayloadCache"]


class PayloadCache:
    """Message payloads by (stream, sequence), least recently used dropped first; thread-safe.

    A payload larger than the whole budget is not kept.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[tuple[str, int], bytes] = collections.OrderedDict()
        self._bytes = 0

    def get(self, stream: str, seq: int) -> bytes | None:
        """The payload of message ``seq`` of ``stream`` if kept."""
        with self._lock:
            payload = self._entries.get((stream, seq))
            if payload is not None:
                self._entries.move_to_end((stream, seq))
            return payload

    def put(self, stream: str, seq: int, payload: bytes) -> None:
        """Keeps a payload, dropping the least recently used ones beyond the budget."""
        if len(payload) > self.max_bytes:
            return
        with self._lock:
            previous = self._entries.pop((stream, seq), None)
            if previous is not None:
                self._bytes -= len(previous)
            self._entries[(stream, seq)] = payload
            self._bytes += len(payload)
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped)

    def forget_stream(self, stream: str) -> None:
        """Drops every payload of ``stream`` (deleted)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == stream]:
                self._bytes -= len(self._entries.pop(key))

    @property
    def size(self) -> int:
        """The bytes kept now."""
        with self._lock:
            return self._bytes

    def __repr__(self) -> str:
        return f"PayloadCache(max_bytes={self.max_bytes}, kept={self.size})"
