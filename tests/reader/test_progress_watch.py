"""An engine's look at its group's progress: the figures, and one log line per stall.

On a real server with a synthetic clock: a group state that stops reading
while events wait; the stall is logged once, named, and again only after
the watermark moved on.
"""

from __future__ import annotations

import logging

import pytest

from connector import StoreClient, StreamManager
from connector.clock import ManualClock
from connector.groups.state import GroupState
from connector.reader.progress_watch import ProgressWatch
from connector.server import StoreServer


def test_a_stall_longer_than_the_threshold_is_logged_once_with_what_holds_it(
    store_server: StoreServer, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with StoreClient(store_server.uri) as client:
        StreamManager(client).create_scope("iot")
        client.create_stream("iot", "s", 1)
        client.append("iot/s/0", "w", 0, [b"a", b"b"])
        written = client.segment_info("iot/s/0")
        stuck = GroupState.starting_at({"iot/s/0": 0}, {"iot/s/0": written.creation_time - 1})
        logger = logging.getLogger("tests.progress_watch")
        watch = ProgressWatch("the test job", ["iot/s"], logger, stall_after_ms=5_000)
        with caplog.at_level(logging.WARNING, logger=logger.name):
            clock.set(written.last_write_time + 1_000)
            look = watch.look(client, stuck)
            assert (look.progress.unread_events, look.progress.processing_time_delay_ms) == (
                2,
                1_001,
            )
            assert caplog.records == []  # 1 s: no stall yet
            clock.advance(9_000)
            watch.look(client, stuck)
            watch.look(client, stuck)  # the same stall: not again
            [line] = [r.getMessage() for r in caplog.records]
            assert "the watermark of the test job has stood for 10.0 s" in line
            assert "the test job is behind on iot/s/0: 2 events unread" in line
            caught_up = GroupState.starting_at(
                {"iot/s/0": written.write_offset}, {"iot/s/0": written.watermark}
            )
            client.append("iot/s/0", "w", 2, [b"c"])  # the tail's watermark moves on
            assert watch.look(client, caught_up).progress.unread_events == 1
            clock.advance(20_000)
            watch.look(client, stuck)  # a new stall
            assert len(caplog.records) == 2
