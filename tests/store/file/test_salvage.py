"""Checking and repairing a damaged data dir: what a salvage keeps, rebuilds, mends and names.

In process, on a file store's real files (the end-to-end run, with a server
process refusing the damaged dir first, is ``tests/faults/test_bit_flips.py``).
"""

from __future__ import annotations

import pathlib
import random
import zlib

import pytest

from connector.errors import DataDirDamagedError, FailedPreconditionError
from connector.framing import iter_frames
from connector.store import SegmentStore, StoreConfig
from connector.store.file.bit_flips import flipped_bit
from connector.store.file.salvage import REPAIR_WRITER, check, repair

SEGMENTS = ("p/s/0", "p/s/1")


def _store(data_dir: pathlib.Path) -> SegmentStore:
    return SegmentStore(StoreConfig(data_dir=str(data_dir), polling_period_ms=None))


def _filled(data_dir: pathlib.Path, appends: int = 30) -> dict[str, list[tuple[bytes, int]]]:
    """A stopped store of ``appends`` appends of 5 events per segment: (payload, time) each."""
    stored: dict[str, list[tuple[bytes, int]]] = {s: [] for s in SEGMENTS}
    with _store(data_dir) as store:
        store.create_scope("p")
        store.create_stream("p", "s", len(SEGMENTS))
        for number in range(appends):
            for segment in SEGMENTS:
                events = [f"{segment}/{number}/{e}".encode() for e in range(5)]
                result = store.append(segment, "w", number * 5, events)
                stored[segment] += [(e, result.ingestion_time) for e in events]
        store.compare_and_set_state("readergroup/p/g", 0, b"{}")
    return stored


def _served(store: SegmentStore, segment: str) -> list[tuple[bytes, int]]:
    result = store.read(segment, 0, 1 << 20)
    return [(f.payload, f.ingestion_time) for f in iter_frames(result.data)]


def _damage(path: pathlib.Path, start: int, stop: int) -> None:
    data = bytearray(path.read_bytes())
    data[start:stop] = bytes(stop - start)
    path.write_bytes(bytes(data))


def test_repair_rebuilds_the_appends_a_damaged_journal_lost_from_the_data_files(
    data_dir: pathlib.Path,
) -> None:
    stored = _filled(data_dir)
    journal = data_dir / "journal.log"
    size = journal.stat().st_size
    _damage(journal, size - 900, size - 20)  # the last appends' commits and more
    with pytest.raises(DataDirDamagedError, match="is damaged at byte"):
        _store(data_dir)
    damaged = journal.read_bytes()

    found = check(data_dir)
    assert found.damaged and journal.read_bytes() == damaged  # a check changes nothing
    repaired = repair(data_dir)
    assert repaired.rebuilt == found.rebuilt
    rebuilt = {r.segment: r for r in repaired.rebuilt}
    assert set(rebuilt) == set(SEGMENTS)
    assert all(r.events == 5 * r.appends and r.appends >= 1 for r in rebuilt.values())
    assert repaired.kept_journal and (data_dir / repaired.kept_journal).exists()
    with _store(data_dir) as store:
        for segment in SEGMENTS:
            assert _served(store, segment) == stored[segment]  # ingestion times too
            info = store.segment_info(segment)
            assert info.watermark == stored[segment][-1][1] - 1
            plan = store.plan_read(segment, 0)
            assert plan.events == len(stored[segment])
        # The lost commits took the writer's numbers with them: its next append is a gap.
        lost_from = min(r.start for r in rebuilt.values())
        assert lost_from > 0
        with pytest.raises(FailedPreconditionError, match="gap|expected"):
            store.append("p/s/0", "w", 30 * 5, [b"next"])
        assert store.append("p/s/0", "w2", 0, [b"a new writer"]).appended == 1
    assert REPAIR_WRITER in (data_dir / "journal.log").read_text(errors="replace")


def test_a_lost_stream_record_leaves_its_data_files_named_as_orphans(
    data_dir: pathlib.Path,
) -> None:
    stored = _filled(data_dir, appends=4)
    journal = data_dir / "journal.log"
    _damage(journal, 40, 120)  # the stream's creation, after the scope's

    found = check(data_dir)
    assert [d.file for d in found.damage] == ["journal.log"]
    assert found.orphans == {f"segments/{s}.events": len(stored[s]) for s in SEGMENTS}
    assert found.not_applied and all("does not exist" in why for why in found.not_applied)
    assert any(line.startswith("ORPHAN segments/p/s/0.events") for line in found.lines())
    repair(data_dir)
    with _store(data_dir) as store:
        assert store.scopes() == ["p"] and store.list_streams("p") == []
        assert store.get_state("readergroup/p/g").value == b"{}"
    assert all((data_dir / f"segments/{s}.events").exists() for s in SEGMENTS)


def test_damage_in_the_middle_keeps_every_event_and_recounts_the_index(
    data_dir: pathlib.Path,
) -> None:
    stored = _filled(data_dir)
    journal = data_dir / "journal.log"
    before = journal.read_bytes()
    _damage(journal, 1000, 1400)

    found = check(data_dir)
    assert journal.read_bytes() == bytearray(before[:1000]) + bytes(400) + before[1400:]
    assert set(found.recounted) == set(SEGMENTS) and found.rebuilt == []
    repair(data_dir)
    with _store(data_dir) as store:
        for segment in SEGMENTS:
            assert _served(store, segment) == stored[segment]
            assert store.plan_read(segment, 0).events == len(stored[segment])
    assert check(data_dir).damaged is False


def test_a_single_flipped_bit_is_mended_wherever_it_is(data_dir: pathlib.Path) -> None:
    stored = _filled(data_dir, appends=3)
    journal = data_dir / "journal.log"
    original = journal.read_bytes()
    rng = random.Random(7)
    for bit in sorted(rng.sample(range(len(original) * 8), 12)):
        flipped = bytearray(original)
        flipped[bit // 8] ^= 1 << (bit % 8)
        journal.write_bytes(bytes(flipped))
        found = check(data_dir)
        assert [d.cost.startswith("mended") for d in found.damage] == [True], found.lines()
        repair(data_dir)
        with _store(data_dir) as store:
            assert [_served(store, s) for s in SEGMENTS] == [stored[s] for s in SEGMENTS]
        journal.write_bytes(original)


def test_a_data_file_shorter_than_its_commits_is_not_repaired(data_dir: pathlib.Path) -> None:
    _filled(data_dir, appends=3)
    events = data_dir / "segments/p/s/1.events"
    events.write_bytes(events.read_bytes()[:-10])
    with pytest.raises(DataDirDamagedError, match="holds .* but .* were committed"):
        _store(data_dir)
    assert "holds" in check(data_dir).damage[0].reason
    with pytest.raises(DataDirDamagedError, match="restore it"):
        repair(data_dir)


def test_flipped_bit_points_at_the_one_bit_a_crc_mismatch_comes_from() -> None:
    rng = random.Random(3)
    for length in (1, 9, 700, 5000):
        message = rng.randbytes(length)
        crc = zlib.crc32(message)
        bit = rng.randrange(length * 8)
        damaged = bytearray(message)
        damaged[bit // 8] ^= 1 << (bit % 8)
        assert flipped_bit(bytes(damaged), crc) == bit
        assert flipped_bit(message, crc) is None
