"""A reader group on a full disk: its readers read on, positions in memory, until a write succeeds.

The store is a server process on a 4 MiB tmpfs (tests run as root), filled
while a reader is in the middle of a stream.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any

import pytest

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.errors import ResourceExhaustedError
from connector.reader import EventReader, ReaderConfig, ReaderGroup, ReaderGroupManager, TimeDomain
from tests.conftest import wait_until
from tests.probes import fill_disk, fill_journal
from tests.reader.conftest import ReadLog, drain, read_some

pytestmark = pytest.mark.slow

KEYS = 10
BEFORE = 200  # events written before the disk fills
AFTER = 20  # events written once space is back
SYNC_MS = 20
CONFIG = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME, max_event_time_lag=0)


def _write(client: StoreClient, first: int, count: int) -> None:
    with EventWriter(client, "rg/s", JsonSerializer()) as writer:
        for number in range(first, first + count):
            writer.write_event({"n": number}, routing_key=f"k{number % KEYS}")


def _positions(group: ReaderGroup) -> dict[str, int]:
    """The offsets the group's stored state holds for its segments."""
    return {s: c.offset for s, c in group.record().state.cursors.items()}


def _reader(group: ReaderGroup, name: str, **options: Any) -> EventReader[Any]:
    return group.create_reader(name, JsonSerializer(), CONFIG, sync_interval_ms=SYNC_MS, **options)


def _numbers(log: ReadLog) -> list[int]:
    return [read.event["n"] for read in log.events]


def _assert_each_key_in_order(log: ReadLog) -> None:
    by_key: dict[str, list[int]] = {}
    for read in log.events:
        by_key.setdefault(read.routing_key, []).append(read.event["n"])
    assert all(numbers == sorted(numbers) for numbers in by_key.values()), by_key


def _setup(client: StoreClient) -> ReaderGroup:
    StreamManager(client).create_scope("rg")
    StreamManager(client).create_stream("rg", "s", segment_count=2)
    _write(client, 0, BEFORE)
    return ReaderGroupManager(client).create_reader_group("rg", "g", ["rg/s"])


def _read_until_a_position_is_written(
    group: ReaderGroup, reader: EventReader[Any], log: ReadLog
) -> None:
    def written() -> bool:
        read_some(reader, log, 5, timeout_ms=10)
        return sum(_positions(group).values()) > 0

    wait_until(written, timeout=10, what="the reader's position in the group's state")
    assert len(log.events) < BEFORE, "the reader is in the middle of the stream"


def test_a_reader_reads_on_with_its_position_in_memory_while_the_disk_is_full(
    small_disk: pathlib.Path, spawn_server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connector.reader.reader")
    server = spawn_server(small_disk / "data")
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        group = _setup(client)
        reader = _reader(group, "r1")
        log = ReadLog()
        _read_until_a_position_is_written(group, reader, log)

        filler = fill_disk(small_disk)
        fill_journal(client)
        written = _positions(group)
        drain([(reader, log)], BEFORE)  # every sync meanwhile is refused for want of space
        assert _positions(group) == written, "the group's state keeps the positions last written"
        with pytest.raises(ResourceExhaustedError):
            _reader(group, "r2")  # joining is a write
        refusals = [r for r in caplog.records if "is failing" in r.getMessage()]
        assert len(refusals) == 1, "a run of refused syncs is logged once"
        assert "out of disk space" in refusals[0].getMessage()

        filler.unlink()
        ends = {s: client.segment_info(s).write_offset for s in written}

        def position_written() -> bool:
            read_some(reader, log, 5, timeout_ms=10)
            return _positions(group) == ends

        wait_until(position_written, timeout=10, what="the position in memory written")
        assert any("works again" in r.getMessage() for r in caplog.records)
        _write(client, BEFORE, AFTER)
        drain([(reader, log)], BEFORE + AFTER)
        reader.close()
    assert sorted(_numbers(log)) == list(range(BEFORE + AFTER)), "nothing lost, nothing twice"
    _assert_each_key_in_order(log)
    log.assert_watermark_rules(lag_ms=0)


def test_a_reader_that_stops_before_its_position_is_written_is_read_again_from_the_last_written(
    small_disk: pathlib.Path, spawn_server
) -> None:
    server = spawn_server(small_disk / "data")
    with StoreClient(server.uri, retry_timeout_s=2.0) as client:
        group = _setup(client)
        first = _reader(group, "r1", lease_ms=1_000)
        first_log = ReadLog()
        _read_until_a_position_is_written(group, first, first_log)

        filler = fill_disk(small_disk)
        fill_journal(client)
        written = _positions(group)
        drain([(first, first_log)], BEFORE)
        with pytest.raises(ResourceExhaustedError):
            first.close()  # its process ends here, its last positions never written

        filler.unlink()
        second = _reader(group, "r2")
        second_log = ReadLog()
        unwritten = [
            read.event["n"]
            for read in first_log.events
            if read.position is not None and read.position.offset >= written[read.position.segment]
        ]
        drain([(second, second_log)], len(unwritten), timeout_s=30)  # once r1's lease ran out
        second.close()
    assert sorted(_numbers(second_log)) == sorted(unwritten), "again from the last written position"
    assert sorted(_numbers(first_log) + _numbers(second_log)) == sorted(
        list(range(BEFORE)) + unwritten
    ), "at least once: every event, those after the last written position twice"
    _assert_each_key_in_order(second_log)
