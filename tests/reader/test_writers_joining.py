"""A writer joins the event-time watermark before its first events: none of them is late.

A writer holds the stream's event-time watermark back only from its first
assertion on (seed 002's W_SET). One asserting from its events
(``WriterConfig(assert_watermarks_from=...)``) joins in the call that
carries its first events, before them: at the least event time of the
batch, less the bound, less 1. So neither its own assertion after the batch
nor another writer's assertion that lands between its appends makes its
first events late. A writer that joins after a reader's watermark passed
its events' times (a late joiner) finds them late: stored, flagged, never
dropped. Real servers, a live reader in the event-time domain, both storages.
"""

from __future__ import annotations

from typing import Any

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient, WriterConfig
from connector.client.routing import key_position
from connector.groups.state import NO_WRITER
from connector.reader import (
    FieldTimestampAssigner,
    ReaderConfig,
    ReaderGroup,
    ReaderGroupManager,
    TimeDomain,
)
from connector.reader.reader import EventReader
from tests.conftest import CLOCK_START_MS, new_stream_in, wait_until

from .conftest import ReadLog, drain, read_some

pytestmark = pytest.mark.storages("file", "jetstream")

#: The event time the writers' events start at.
BASE = CLOCK_START_MS
ASSERTING = WriterConfig(assert_watermarks_from="ts")


def _event_time_reader(client: StoreClient, stream: str) -> tuple[EventReader[Any], ReaderGroup]:
    scope, name = stream.split("/")
    group = ReaderGroupManager(client).create_reader_group(scope, f"g-{name}", [stream])
    config = ReaderConfig(
        time_domain=TimeDomain.EVENT_TIME, timestamp_assigner=FieldTimestampAssigner("ts")
    )
    return group.create_reader("r", JsonSerializer(), config), group


def _keys_of_segment(segment: int, count: int) -> list[str]:
    """``count`` routing keys of a two-segment stream's segment ``segment`` (0: [0, 0.5))."""
    keys = (f"k{n}" for n in range(10_000))
    return [k for k in keys if (key_position(k) >= 0.5) == bool(segment)][:count]


def test_an_asserting_writers_first_batch_is_not_late_because_of_its_own_assertion(
    store_client: StoreClient,
) -> None:
    stream = new_stream_in(store_client, 1)
    reader, group = _event_time_reader(store_client, stream)
    log = ReadLog()
    # The reader is at the tail and knows that no writer holds the watermark there.
    wait_until(
        lambda: (
            read_some(reader, log, 1),
            all(c.event_time == NO_WRITER for c in group.record().state.cursors.values()),
        )[1],
        what="the reader to read the tail",
    )
    with EventWriter(store_client, stream, JsonSerializer(), config=ASSERTING) as writer:
        for ts in range(BASE, BASE + 5_000, 1_000):
            writer.write_event({"ts": ts})
        writer.flush()
        drain([(reader, log)], 5)
        read_some(reader, log, 5)
    assert [(r.event["ts"], r.late) for r in log.events] == [
        (ts, False) for ts in range(BASE, BASE + 5_000, 1_000)
    ]
    # The writer joined at its least event time less 1, then asserted its greatest less 1.
    assert log.watermarks == [BASE - 1, BASE + 3_999]
    reader.close()


def test_another_writer_raising_the_watermark_between_a_writers_first_appends_makes_none_late(
    store_client: StoreClient,
) -> None:
    stream = new_stream_in(store_client, 2)
    reader, _ = _event_time_reader(store_client, stream)
    log = ReadLog()
    other = EventWriter(store_client, stream, JsonSerializer(), writer_id="other")
    other.note_time(BASE - 10_000)
    wait_until(
        lambda: (read_some(reader, log, 1), reader.last_watermark == BASE - 10_000)[1],
        what="the reader to see the other writer's assertion",
    )
    first, second = _keys_of_segment(0, 3), _keys_of_segment(1, 2)
    config = WriterConfig(max_batch_events=3, assert_watermarks_from="ts")
    writer = EventWriter(store_client, stream, JsonSerializer(), writer_id="w", config=config)
    for n, key in enumerate(first):  # a full batch: sent at once, to the first segment
        writer.write_event({"ts": BASE + 1_000 * n}, routing_key=key)
    assert writer.pending_events == 0
    other.note_time(BASE + 10_000)  # raises the watermark between the writer's appends
    wait_until(
        lambda: (read_some(reader, log, 5), (reader.last_watermark or 0) >= BASE - 1)[1],
        what="the reader to read both segments' tails",
    )
    for n, key in enumerate(second, start=3):
        writer.write_event({"ts": BASE + 1_000 * n}, routing_key=key)
    writer.flush()
    drain([(reader, log)], 5)
    read_some(reader, log, 5)
    assert sorted((r.event["ts"], r.late) for r in log.events) == [
        (ts, False) for ts in range(BASE, BASE + 5_000, 1_000)
    ]
    assert max(log.watermarks) == BASE + 3_999  # the least of the two writers now

    # A writer that joins once the reader's watermark passed its events' times: late, kept.
    with EventWriter(store_client, stream, JsonSerializer(), config=ASSERTING) as late_joiner:
        late_joiner.write_event({"ts": BASE + 100}, routing_key=first[0])
    drain([(reader, log)], 6)
    assert [(r.event["ts"], r.late) for r in log.events[5:]] == [(BASE + 100, True)]
    writer.close()
    other.close()
    reader.close()
