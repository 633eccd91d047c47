"""Journal compaction: an idle store's journal, and its restart, follow the live state."""

from __future__ import annotations

import pathlib

from connector.store import SegmentStore, StoreConfig
from connector.store.compaction import fold_ticks
from connector.store.journal import Journal

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


def test_an_idle_store_folds_its_ticks_and_restarts_to_the_same_watermarks(tmp_path, clock):
    config = StoreConfig(
        data_dir=str(tmp_path / "data"),
        clock=clock,
        polling_period_ms=None,
        compact_after_ticks=500,
    )
    store = SegmentStore(config)
    store.create_scope("idle")
    for number in range(STREAMS):
        store.create_stream("idle", f"s{number}", 1)
    store.append("idle/s0/0", "w", 0, [b"first"])
    for _ in range(200):  # 200 rounds of idle ticks for 50 segments: 10,000 tick records
        clock.advance(config.max_watermark_lag_ms + 1)
        assert store.advance_idle_segments() >= STREAMS - 1
    before = _infos(store)
    store.close()

    records = _records(tmp_path / "data")
    assert len(records) < STREAMS + 1 + 2 + 2 * 500, f"{len(records)} records kept"
    reopened = SegmentStore(config)
    assert _infos(reopened) == before, "no watermark steps back after the restart"
    assert reopened.read("idle/s0/0", 0, 1 << 20).next_offset > 0
    reopened.close()


def test_folding_keeps_what_replay_ends_with(tmp_path, clock):
    config = StoreConfig(data_dir=str(tmp_path / "data"), clock=clock, polling_period_ms=None)
    store = SegmentStore(config)
    store.create_scope("idle")
    store.create_stream("idle", "s0", 2)
    for round_number in range(30):
        clock.advance(config.max_watermark_lag_ms + 1)
        store.advance_idle_segments()
        if round_number % 7 == 0:
            store.append("idle/s0/0", "w", round_number // 7, [b"x" * (round_number + 1)])
        if round_number == 20:
            store.scale_stream("idle", "s0", [1], split_count=2)
    expected = {
        s.segment: store.segment_info(s.segment)
        for s in store.describe_stream("idle", "s0").segments
    }
    index_before = [store.read("idle/s0/0", 0, n).watermark for n in range(1, 200, 7)]
    store.close()
    journal = Journal(str(tmp_path / "data" / "journal.log"))
    records = list(journal.replay())
    folded = fold_ticks(records)
    assert len(folded) < len(records)
    journal.rewrite(folded)
    journal.close()
    reopened = SegmentStore(config)
    actual = {
        s.segment: reopened.segment_info(s.segment)
        for s in reopened.describe_stream("idle", "s0").segments
    }
    assert actual == expected
    assert [reopened.read("idle/s0/0", 0, n).watermark for n in range(1, 200, 7)] == index_before
    reopened.close()
