"""Journal compaction: the journal stays near the live state; a restart gives the same store."""

from __future__ import annotations

import errno
import os
import pathlib

import pytest

from connector.background import TaskStatus
from connector.clock import ManualClock
from connector.framing import iter_frames
from connector.store import SegmentStore, StoreConfig
from connector.store.file.store import COMPACTION_RETRY_MS

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


def test_a_failed_compaction_is_reported_and_retried_a_period_later(
    tmp_path: pathlib.Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SegmentStore(_config(tmp_path / "data", clock, compact_after=20))
    store.create_scope("c")
    store.create_stream("c", "s", 1)

    def compaction() -> TaskStatus:
        """The task's status once the sequencer is past the last change's compaction round."""
        store.compare_and_set_state("settle", 99, b"")  # answered after the rounds before it
        (status,) = [s for s in store.background_status() if s.name == "journal_compaction"]
        return status

    def no_space(records: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real_rewrite = store.engine._journal.rewrite
    monkeypatch.setattr(store.engine._journal, "rewrite", no_space)
    for number in range(30):  # due after 20 records: the first try fails, the store goes on
        store.append("c/s/0", "w", number, [b"e"])
    assert compaction().failed_rounds == 1, "retried no sooner than a period later"
    assert compaction().last_error == "OSError: [Errno 28] No space left on device"
    clock.advance(COMPACTION_RETRY_MS)
    store.append("c/s/0", "w", 30, [b"e"])
    assert compaction().failed_rounds == 2

    monkeypatch.setattr(store.engine._journal, "rewrite", real_rewrite)  # space is back
    clock.advance(COMPACTION_RETRY_MS)
    store.append("c/s/0", "w", 31, [b"e"])
    assert compaction().failing_since_ms is None
    assert store.engine._journal.records < 10, "compacted as soon as it was retried"
    store.close()
    with SegmentStore(_config(tmp_path / "data", clock, compact_after=20)) as reopened:
        assert reopened.append("c/s/0", "w", 31, [b"e"]).duplicates == 1
