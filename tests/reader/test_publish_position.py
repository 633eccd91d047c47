"""A host's own position published as a reader group (``publish_position``), for monitoring.

Against a real store server: the group appears with the host's position,
its lag is the reader-group lag, each call replaces the position, and a
group of that name with readers of its own is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connector.client import EventWriter, JsonSerializer, StoreClient
from connector.groups.lag import group_lag
from connector.reader import ReaderConfig
from connector.reader.group import ReaderGroupManager
from connector.reader.source import StreamCut, start_state
from tests.conftest import new_stream_in


def test_a_published_position_is_a_reader_group_whose_lag_counts_from_it(
    start_store: Callable[..., Any],
) -> None:
    server = start_store()
    with StoreClient(server.uri) as client:
        stream = new_stream_in(client, 2)
        scope = stream.split("/")[0]
        with EventWriter(client, stream, JsonSerializer()) as writer:
            for n in range(6):
                writer.write_event({"n": n}, routing_key=f"k{n}")
        manager = ReaderGroupManager(client)
        earliest = start_state(client, [stream], StreamCut.earliest())
        assert manager.publish_position(scope, "spark-query", [stream], earliest)
        record = manager.get_reader_group(scope, "spark-query").record()
        assert group_lag(record, client.plan_read).events == 6
        latest = start_state(client, [stream], StreamCut.latest())
        assert manager.publish_position(scope, "spark-query", [stream], latest)
        record = manager.get_reader_group(scope, "spark-query").record()
        assert group_lag(record, client.plan_read).events == 0

        group = manager.create_reader_group(scope, "dashboard", [stream])
        with group.create_reader("r1", JsonSerializer(), ReaderConfig()):
            before = group.record()
            assert not manager.publish_position(scope, "dashboard", [stream], latest)
            assert group.record() == before
