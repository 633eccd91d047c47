"""Helpers for reader tests: writing numbered events and draining readers."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from connector.client import JsonSerializer, StoreClient
from connector.reader import EventRead, EventReader
from tests.conftest import new_stream_in


@pytest.fixture
def new_stream(store_client: StoreClient):  # type: ignore[no-untyped-def]
    """Creates a fresh stream ``rt/stream-N`` with the given segment count."""
    return lambda segments=1: new_stream_in(store_client, segments, scope="rt")


@dataclass
class ReadLog:
    """Everything one reader returned, in order."""

    reads: list[EventRead[Any]] = field(default_factory=list)

    @property
    def events(self) -> list[EventRead[Any]]:
        return [r for r in self.reads if r.is_event]

    @property
    def watermarks(self) -> list[int]:
        return [r.watermark for r in self.reads if r.is_watermark]  # type: ignore[misc]

    def assert_watermark_rules(self, lag_ms: int) -> None:
        """Strictly ascending watermarks; every later event ingested after W + lag."""
        marks = self.watermarks
        assert all(a < b for a, b in zip(marks, marks[1:], strict=False)), (
            f"watermarks not ascending: {marks}"
        )
        current = None
        for read in self.reads:
            if read.is_watermark:
                current = read.watermark
            elif current is not None:
                assert read.ingestion_time > current + lag_ms, (
                    f"event {read.event!r} ingested at {read.ingestion_time} "
                    f"after watermark {current}"
                )


def read_some(reader: EventReader[Any], log: ReadLog, count: int, timeout_ms: int = 20) -> None:
    """Up to ``count`` reads, stopping at the first that times out."""
    for _ in range(count):
        read = reader.read_next_event(timeout_ms)
        if read is None:
            return
        log.reads.append(read)


def drain(
    readers: Iterable[tuple[EventReader[Any], ReadLog]], expected: int, timeout_s: float = 20.0
) -> None:
    """Reads round-robin until the readers together returned ``expected`` events (bounded)."""
    pairs = list(readers)
    deadline = time.monotonic() + timeout_s
    while sum(len(log.events) for _, log in pairs) < expected:
        assert time.monotonic() < deadline, (
            f"read {sum(len(log.events) for _, log in pairs)} of {expected} events in {timeout_s} s"
        )
        for reader, log in pairs:
            read_some(reader, log, 50, timeout_ms=10)


def json_serializer() -> JsonSerializer:
    return JsonSerializer()
