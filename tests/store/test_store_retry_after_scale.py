"""A retried append whose answer was lost, after its segment was split, is not stored twice."""

from __future__ import annotations

import pytest

from connector.errors import SegmentSealedError
from connector.framing import iter_frames
from tests.conftest import new_stream_in

pytestmark = pytest.mark.storages("file", "jetstream")


def test_a_retry_of_an_applied_batch_after_a_split_is_a_duplicate_not_a_seal(store_client):
    stream = new_stream_in(store_client)
    segment = f"{stream}/0"
    store_client.append(segment, "k", 0, [b"0", b"1", b"2"], ["k"] * 3)
    store_client.append(
        segment, "k", 3, [b"3", b"4"], ["k"] * 2
    )  # applied; say its answer was lost
    store_client.scale_stream(*stream.split("/"), [0], split_count=2)

    retried = store_client.append(segment, "k", 3, [b"3", b"4"], ["k"] * 2)

    assert (retried.appended, retried.duplicates) == (0, 2)
    data = store_client.read(segment, 0, 1 << 20).data
    assert [f.payload for f in iter_frames(data)] == [b"0", b"1", b"2", b"3", b"4"]
    with pytest.raises(SegmentSealedError):  # new events still go to the successors
        store_client.append(segment, "k", 5, [b"5"], ["k"])
