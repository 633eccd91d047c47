"""Journal compaction: the journal stays near the live state; a restart gives the same store."""

from __future__ import annotations

import pathlib

from connector.clock import ManualClock
from connector.framing import iter_frames
from connector.store import SegmentStore, StoreConfig

LAG = 100


def _config(data_dir: pathlib.Path, clock: ManualClock, compact_after: int) -> StoreConfig:
    return StoreConfig(
        str(data_dir),
        clock=clock,
        max_watermark_lag_ms=LAG,
        polling_period_ms=None,
        compact_after_records=compact_after,
    )


def _state(store: SegmentStore) -> dict[str, object]:
    """Everything a client can see: descriptions, attributes, data and watermarks at each offset."""
    seen: dict[str, object] = {}
    for scope, stream in store.stream_ids():
        description = store.describe_stream(scope, stream)
        seen[f"{scope}/{stream}"] = description
        for segment in description.segments:
            name = segment.segment
            seen[name] = store.segment_info(name)
            offset, reads = 0, []
            while True:
                result = store.read(name, offset, max_bytes=1)
                reads.append((result.next_offset, result.watermark, result.successors))
                reads += [(f.payload, f.ingestion_time) for f in iter_frames(result.data)]
                if result.next_offset == offset:
                    break
                offset = result.next_offset
            seen[name + " reads"] = reads
    seen["state"] = store.get_state("k")
    return seen


def _history(store: SegmentStore, clock: ManualClock) -> None:
    store.create_scope("c")
    store.create_stream("c", "a", 2)
    store.create_stream("c", "b", 1)
    for number in range(5):
        clock.advance(7)
        store.append("c/a/0", "w0", number, [f"a0-{number}".encode()])
        store.append("c/a/1", "w1", 2 * number, [b"x", b"y"])
    store.scale_stream("c", "a", [0], split_count=2)
    store.append("c/a/2", "w0", 0, [b"after the split"])
    store.seal_stream("c", "b")
    store.compare_and_set_state("k", b"one", 0)
    for _ in range(300):
        clock.advance(LAG + 1)
        store.advance_idle_segments()


def test_a_compacted_journal_restores_exactly_the_store_it_was_taken_from(
    tmp_path: pathlib.Path,
) -> None:
    clock = ManualClock(1_000)
    with SegmentStore(_config(tmp_path / "compacted", clock, 100)) as store:
        _history(store, clock)
        before = _state(store)
        compacted_size = store.journal_size()
    with SegmentStore(_config(tmp_path / "compacted", clock, 100)) as store:
        assert _state(store) == before
        # Time goes on after the restart: the next tick is later than any before it.
        last = store.segment_info("c/a/2").last_write_time
        clock.advance(LAG + 1)
        store.advance_idle_segments()
        assert store.segment_info("c/a/2").last_write_time > last
        # Writer numbers came back: a retried append is a duplicate.
        assert store.append("c/a/2", "w0", 0, [b"after the split"]).duplicates == 1

    clock = ManualClock(1_000)
    with SegmentStore(_config(tmp_path / "full", clock, 10_000_000)) as store:
        _history(store, clock)
        assert _state(store) == before
        full_size = store.journal_size()
    assert compacted_size * 5 < full_size, (compacted_size, full_size)


def test_a_journal_of_history_is_compacted_at_start_and_opens_as_before(
    tmp_path: pathlib.Path,
) -> None:
    clock = ManualClock(1_000)
    with SegmentStore(_config(tmp_path, clock, 10_000_000)) as store:
        _history(store, clock)
        before = _state(store)
        full_size = store.journal_size()
    with SegmentStore(_config(tmp_path, clock, 100)) as store:
        assert _state(store) == before
        assert store.journal_size() * 5 < full_size
    with SegmentStore(_config(tmp_path, clock, 100)) as store:
        assert _state(store) == before
