"""A reader group starting at "earliest" on a truncated stream reads its first readable data."""

from __future__ import annotations

from typing import Any

import pytest

from connector import JsonSerializer, StoreClient
from connector.reader.group import ReaderGroup, ReaderGroupManager
from tests.truncation import truncate_at_tail, truncated_stream

pytestmark = pytest.mark.storages("file", "jetstream")


def read_events(group: ReaderGroup, count: int) -> list[dict[str, Any]]:
    """The events a reader of ``group`` returns: ``count`` of them, then none for a while."""
    events: list[dict[str, Any]] = []
    with group.create_reader("r", JsonSerializer()) as reader:
        for _ in range(count + 20):  # a bounded loop: each read waits at most 500 ms
            read = reader.read_next_event(timeout_ms=500)
            if read is not None and read.is_event:
                events.append(read.event)
            elif len(events) >= count:
                break
    return sorted(events, key=lambda event: event["n"])


def test_a_new_group_starts_at_the_first_readable_offset_of_each_segment(
    store_client: StoreClient,
) -> None:
    kept = truncated_stream(store_client, "t")
    group = ReaderGroupManager(store_client).create_reader_group("t", "g", ["t/s"])
    record = group.record()
    assert "t/s/0" in record.state.finished  # truncated away whole: finished, successors next
    heads = {s: store_client.segment_info(s).first_offset for s in ("t/s/1", "t/s/2")}
    assert {s: c.offset for s, c in record.state.cursors.items()} == heads
    assert all(offset > 0 for offset in heads.values())
    assert read_events(group, len(kept)) == kept


def test_a_reset_to_earliest_after_a_truncation_reads_the_data_that_is_left(
    store_client: StoreClient,
) -> None:
    groups = ReaderGroupManager(store_client)
    kept = truncated_stream(
        store_client,
        "t",
        truncate=lambda: (
            groups.create_reader_group("t", "g", ["t/s"], start="earliest"),
            truncate_at_tail(store_client, "t", "s"),
        ),
    )
    group = groups.get_reader_group("t", "g")
    group.reset_to("earliest")
    assert read_events(group, len(kept)) == kept
