"""A read's start over 1,024 segments asks the store a few calls, not one per segment.

Counted with the server's request counters (real server over gRPC): each
start cut resolves with the stream's description, one ``DescribeTails`` and,
at a time, one ``PlanReads``; so does an end cut at a time.
"""

from __future__ import annotations

import pytest

from connector.client import StoreClient
from connector.clock import ManualClock
from connector.reader.source import StreamCut
from connector.reader.source.cuts import start_state, state_at_time
from connector.server import StoreServer
from tests.conftest import WIDE
from tests.probes import CallCounter

pytestmark = pytest.mark.slow


def test_a_start_over_many_segments_asks_a_few_calls(
    wide: tuple[StoreServer, StoreClient, str], clock: ManualClock
) -> None:
    server, client, stream = wide
    client.append(f"{stream}/700", "w", 0, [b"one"])
    written_at = clock.now_ms()
    clock.advance(10)
    counted = CallCounter(server)
    cuts = {
        "earliest": StreamCut.earliest(),
        "latest": StreamCut.latest(),
        "time": StreamCut.at_time(written_at),
    }
    offsets = {}
    for name, cut in cuts.items():
        state = start_state(client, [stream], cut)
        calls = counted.since()
        assert len(state.cursors) == WIDE, name
        assert calls.get("GetSegmentInfo", 0) == calls.get("PlanRead", 0) == 0, (name, calls)
        assert calls["all"] <= 3, (name, calls)
        offsets[name] = state.cursors[f"{stream}/700"].offset
    assert offsets["earliest"] == offsets["time"] == 0 < offsets["latest"]  # before, after it
    at = state_at_time(client, [stream], written_at)
    assert len(at.state.cursors) == WIDE
    assert counted.since()["all"] <= 3
