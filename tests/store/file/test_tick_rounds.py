"""A round of idle ticks is one journal record a stream, and a journal of either form restarts."""

from __future__ import annotations

import pathlib

from connector.clock import ManualClock
from connector.store import SegmentStore, StoreConfig
from connector.store.file.journal import Journal
from connector.store.file.store import TICK_GROUP
from connector.store.records import changes_in
from tests.store.file.test_store_compaction import LAG, _config

SEGMENTS = 64


def _journal(data_dir: pathlib.Path) -> list[dict]:
    return list(Journal(str(data_dir / "journal.log")).replay())


def _wide_store(config: StoreConfig, segments: int = SEGMENTS) -> SegmentStore:
    store = SegmentStore(config)
    store.create_scope("r")
    store.create_stream("r", "wide", segments)
    return store


def _watermarks(store: SegmentStore) -> dict[str, int]:
    return {
        s.segment: store.segment_info(s.segment).watermark
        for s in store.describe_stream("r", "wide").segments
    }


def test_a_round_of_ticks_over_a_wide_stream_is_one_record_that_restarts_to_the_same_watermarks(
    tmp_path: pathlib.Path, clock: ManualClock
) -> None:
    config = _config(tmp_path, clock, compact_after=10_000_000)
    with _wide_store(config) as store:
        store.create_stream("r", "narrow", 2)
        before = len(_journal(tmp_path))
        clock.advance(LAG + 1)
        assert store.advance_idle_segments() == SEGMENTS + 2
        watermarks = _watermarks(store)
    rounds = _journal(tmp_path)[before:]
    assert [(r["op"], r["stream"], len(r["segs"])) for r in rounds] == [
        ("ticks", "wide", SEGMENTS),
        ("ticks", "narrow", 2),
    ]
    assert {changes_in(r) for r in rounds} == {SEGMENTS, 2}, "compaction counts each segment"
    with SegmentStore(config) as reopened:
        assert _watermarks(reopened) == watermarks
        assert set(watermarks.values()) == {clock.now_ms() - 1}


def test_a_journal_of_one_tick_record_a_segment_still_restarts_to_its_watermarks(
    tmp_path: pathlib.Path, clock: ManualClock
) -> None:
    # Journals written before rounds were one record hold a record per ticked segment.
    config = _config(tmp_path, clock, compact_after=10_000_000)
    _wide_store(config, segments=2).close()
    clock.advance(LAG + 1)
    journal = Journal(str(tmp_path / "journal.log"))
    list(journal.replay())
    for number in range(2):
        journal.add({"op": "tick", "seg": f"r/wide/{number}", "t": clock.now_ms()})
    journal.sync()
    journal.close()
    with SegmentStore(config) as reopened:
        assert set(_watermarks(reopened).values()) == {clock.now_ms() - 1}


def test_rounds_of_ticks_are_compacted_after_as_many_segment_ticks_as_single_records_were(
    tmp_path: pathlib.Path, clock: ManualClock
) -> None:
    config = _config(tmp_path, clock, compact_after=500)
    with _wide_store(config) as store:
        for _ in range(10):  # 640 segment ticks in 10 records: compacted after the 8th
            clock.advance(LAG + 1)
            store.advance_idle_segments()
        watermarks = _watermarks(store)
    assert [r["op"] for r in _journal(tmp_path)] == ["scope", "stream_state", "ticks", "ticks"]
    with SegmentStore(config) as reopened:
        assert _watermarks(reopened) == watermarks


def test_a_large_snapshot_is_rewritten_only_once_the_journal_doubled_its_bytes(
    tmp_path: pathlib.Path, clock: ManualClock
) -> None:
    # A rewrite holds the store's changes back while it runs: at thousands of idle segments
    # it came every few tick rounds when counted in records alone.
    config = _config(tmp_path, clock, compact_after=100)
    with _wide_store(config) as store:
        sizes = []
        for _ in range(60):
            clock.advance(LAG + 1)
            store.advance_idle_segments()
            sizes.append(store.journal_size())
        rewrites = [i for i in range(1, len(sizes)) if sizes[i] < sizes[i - 1]]
        snapshot = sizes[rewrites[0]] - (sizes[rewrites[0] + 1] - sizes[rewrites[0]])
        assert len(rewrites) >= 2, sizes
        for before in (sizes[i - 1] for i in rewrites[1:]):
            assert before >= 2 * snapshot - 2_000, (before, snapshot)  # a round's bytes of slack


def test_a_round_over_more_segments_than_a_group_holds_is_committed_a_group_at_a_time(
    tmp_path: pathlib.Path, clock: ManualClock, monkeypatch
) -> None:
    # An append arriving during a round waits for one group of ticks, not the whole round.
    config = _config(tmp_path, clock, compact_after=10_000_000)
    with _wide_store(config, segments=TICK_GROUP * 2 + 76) as store:
        store.create_stream("r", "small", 3)
        submitted = []
        real_submit = store.engine._sequencer.submit

        def counted(prepare, barrier):  # noqa: ANN001, ANN202
            submitted.append(barrier)
            return real_submit(prepare, barrier)

        monkeypatch.setattr(store.engine._sequencer, "submit", counted)
        before = len(_journal(tmp_path))
        assert store.advance_idle_segments() == 0
        assert submitted == [], "nothing due: the sequencer is not asked"
        clock.advance(LAG + 1)
        assert store.advance_idle_segments() == TICK_GROUP * 2 + 76 + 3
        assert submitted == [False, False, False]
    rounds = _journal(tmp_path)[before:]
    assert [(r["stream"], len(r["segs"])) for r in rounds] == [
        ("wide", TICK_GROUP),
        ("wide", TICK_GROUP),
        ("wide", 76),
        ("small", 3),
    ]
