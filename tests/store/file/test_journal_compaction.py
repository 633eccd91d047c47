"""An idle store's journal, and so its restart, follow the live state, not the ticks' history."""

from __future__ import annotations

import pathlib

from connector.store import SegmentStore, StoreConfig
from connector.store.file.journal import Journal

STREAMS = 50


def _records(data_dir: pathlib.Path) -> list[dict]:
    return list(Journal(str(data_dir / "journal.log")).replay())


def _infos(store: SegmentStore) -> dict[str, tuple]:
    infos = {}
    for number in range(STREAMS):
        for segment in store.describe_stream("idle", f"s{number}").segments:
            info = store.segment_info(segment.segment)
            infos[info.segment] = (info.write_offset, info.last_write_time, info.watermark)
    return infos


def test_an_idle_store_compacts_its_ticks_and_restarts_to_the_same_watermarks(tmp_path, clock):
    config = StoreConfig(
        data_dir=str(tmp_path / "data"),
        clock=clock,
        polling_period_ms=None,
        compact_after_records=500,
    )
    store = SegmentStore(config)
    store.create_scope("idle")
    for number in range(STREAMS):
        store.create_stream("idle", f"s{number}", 1)
    store.append("idle/s0/0", "w", 0, [b"first"])
    store.scale_stream("idle", "s1", [0], split_count=2)
    for _ in range(200):  # 200 rounds of idle ticks for about 50 segments: 10,000 records
        clock.advance(config.max_watermark_lag_ms + 1)
        assert store.advance_idle_segments() > 0
    before = _infos(store)
    watermarks_before = [store.read("idle/s0/0", 0, n).watermark for n in (1, 10, 100)]
    store.close()

    assert len(_records(tmp_path / "data")) < 2_000, "the journal follows the live state"
    reopened = SegmentStore(config)
    assert _infos(reopened) == before, "no watermark steps back after the restart"
    assert [reopened.read("idle/s0/0", 0, n).watermark for n in (1, 10, 100)] == watermarks_before
    assert reopened.append("idle/s0/0", "w", 0, [b"first"]).duplicates == 1
    reopened.close()
