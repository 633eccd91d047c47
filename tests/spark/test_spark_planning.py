"""The driver's offset planning against a real store server: races Spark cannot arrange.

No SparkSession: :mod:`spark_adapter.planning` is plain Python over a
:class:`StoreClient`. A wrapper client replays a description taken before a
split, as if the split came between the planner's two calls to the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.clock import ManualClock
from connector.framing import iter_frames
from connector.names import StreamId
from spark_adapter.planning import initial_offset, latest_offset, ranges_between


class _StaleDescriptions:
    """A client whose first ``describe_stream`` answers with ``stale``; everything else is real."""

    def __init__(self, client: StoreClient, stale: Any):
        self._client = client
        self._stale: list[Any] = [stale]

    def describe_stream(self, scope: str, stream: str) -> Any:
        if self._stale:
            return self._stale.pop()
        return self._client.describe_stream(scope, stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_latest_offset_includes_successors_of_a_segment_split_while_it_plans(
    start_store: Callable[..., Any], clock: ManualClock
) -> None:
    """Without the successors, the group watermark would pass an event not yet read."""
    server = start_store(max_watermark_lag_ms=0)
    with StoreClient(server.uri) as client:
        manager = StreamManager(client)
        manager.create_scope("plan")
        manager.create_stream("plan", "events", segment_count=2)
        stream = StreamId.parse("plan/events")
        start = initial_offset(client, [stream], "earliest", 0)
        stale = client.describe_stream("plan", "events")  # segments 0 and 1, both open
        clock.advance(100)
        manager.split_segment("plan", "events", 0)  # successors 2 and 3
        clock.advance(100)
        with EventWriter(client, stream, JsonSerializer()) as writer:
            writer.write_event({"n": 1}, routing_key="k7")  # key position 0.148: segment 2
        [event] = iter_frames(client.read("plan/events/2", 0).data, 0)
        clock.advance(500)
        server.store.advance_idle_segments()  # segment 1's watermark is now past the event

        end = latest_offset(_StaleDescriptions(client, stale), [stream], start, 0)

        assert set(end.state.cursors) == {"plan/events/1", "plan/events/2", "plan/events/3"}
        assert end.state.finished == {"plan/events/0"}
        ranges = {r.segment: (r.start, r.stop) for r in ranges_between(start, end)}
        assert ranges == {"plan/events/2": (0, event.end)}  # the event is in this batch
        assert end.watermark is not None and end.watermark >= event.ingestion_time
