"""Routing keys: a stable position in [0, 1) for each key."""

from __future__ import annotations

import hashlib
import random
from functools import lru_cache

__all__ = ["key_position"]

_SCALE = float(1 << 64)


@lru_cache(maxsize=65536)
def _hashed(routing_key: str) -> float:
    digest = hashlib.blake2b(routing_key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


def key_position(routing_key: str | None) -> float:
    """The position of ``routing_key`` in the key space [0, 1).

    The same key always maps to the same position, in every process and
    version, so all its events land in one segment per epoch and keep their
    order. ``None`` picks a random position (no order is promised).
    """
    if routing_key is None:
        return random.random()
    return _hashed(routing_key)
