"""The writer's segment router: a position goes to the open segment owning it, as last described."""

from __future__ import annotations

from connector.client import StoreClient, StreamManager
from connector.client.segment_router import SegmentRouter
from connector.names import StreamId
from tests.conftest import new_stream_in


def test_positions_go_to_the_segment_owning_them_and_to_its_successors_after_a_refresh(
    store_client: StoreClient,
) -> None:
    stream = new_stream_in(store_client, segments=2)
    router = SegmentRouter(store_client, StreamId.parse(stream))
    assert [router.segment_for(p) for p in (0.0, 0.49, 0.5, 0.99)] == [
        f"{stream}/0",
        f"{stream}/0",
        f"{stream}/1",
        f"{stream}/1",
    ]
    StreamManager(store_client).split_segment(f"{stream}/0", into=2)
    assert router.segment_for(0.3) == f"{stream}/0"  # as last described, until refreshed
    router.refresh()
    assert router.open_names() == {f"{stream}/1", f"{stream}/2", f"{stream}/3"}
    assert [router.segment_for(p) for p in (0.1, 0.3, 0.7)] == [
        f"{stream}/2",
        f"{stream}/3",
        f"{stream}/1",
    ]
