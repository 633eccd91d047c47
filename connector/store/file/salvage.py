"""Checking a stopped file store's data dir, and salvaging what a damaged one still proves.

:func:`check` reads everything and changes nothing: the journal record by
record (:func:`connector.store.file.journal.scan`) and every data file frame by
frame, and says what is damaged and what it costs. :func:`repair` keeps
every record and every event that can be proved, and writes a new journal:

- every intact record of the journal, those after a damaged stretch too
  (a record that no longer applies, such as an append to a stream whose
  creation was in the damage, is left out and named), and every damaged
  record that one flipped bit explains, with the bit put back (a CRC-32
  points at a single flipped bit, :mod:`connector.store.file.bit_flips`);
- the appends a damaged stretch took with it, rebuilt from the data files:
  every frame carries its checksum and its ingestion time, and the frames
  of one append share one time (a segment's clock is strictly increasing),
  so the intact frames after a segment's last surviving commit give back
  those appends whole, with their ingestion times, event counts and
  watermarks. What no data file holds is lost with the damaged records:
  the writers' event numbers in them (a writer whose appends were there
  sees its next append refused as a gap, and starts again under a new
  writer id), idle ticks (the idle advancer ticks again), and any scope,
  stream, scaling, seal or reader-group state change among them. Frames
  past the last commit cannot be told from an append a crash cut off
  before it was acknowledged: they are kept (an unacknowledged batch its
  writer sends again may then be stored twice; nothing acknowledged is
  lost);
- nothing of a data file is changed: a damaged event inside committed data
  stays, and reads answer DATA_LOSS there, naming where its append ends
  (read on from there, or truncate the stream at it).

The damaged journal is kept beside the new one (``journal.log.damaged-*``).
A data file that holds less than its commits is not repaired: restore it.
Both take the data dir's lock: no server may run on it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from connector.errors import DataDirDamagedError, InvalidArgumentError, quoted
from connector.framing import HEADER, decode_columns, intact_prefix
from connector.store.boundaries import checkpoints
from connector.store.file.catalog import Catalog
from connector.store.file.data_dir import DataDirLock
from connector.store.file.journal import Journal, JournalScan, body, mend, scan
from connector.store.file.open_files import OpenFiles
from connector.store.file.segment import Segment
from connector.store.records import Committed, decode, encode

__all__ = ["REPAIR_WRITER", "Findings", "check", "repair"]

#: The writer id of the appends a repair rebuilt from data files (their writers are unknown).
REPAIR_WRITER = "tidemark-repair"
#: How much of a data file is read at a time.
_WINDOW = 4 * 1024 * 1024


@dataclass(frozen=True)
class Damage:
    """A damaged stretch ``[offset, end)`` of one file of the data dir, and what it costs."""

    file: str
    offset: int
    end: int
    reason: str
    cost: str


@dataclass(frozen=True)
class Rebuilt:
    """Appends past a segment's last surviving commit that its data file proves."""

    segment: str
    start: int
    end: int
    appends: int
    events: int
    first_time: int
    last_time: int


@dataclass
class Findings:
    """What :func:`check` found in a data dir (and, after :func:`repair`, what it did)."""

    data_dir: str
    journal_bytes: int = 0
    journal_records: int = 0
    #: Bytes of a torn tail: an append a crash cut short, never acknowledged (cut at start).
    torn_tail: int = 0
    damage: list[Damage] = field(default_factory=list)
    #: Intact records that no longer apply once the damaged ones are gone, and why.
    not_applied: list[str] = field(default_factory=list)
    rebuilt: list[Rebuilt] = field(default_factory=list)
    #: Segments whose index counts too few events (appends of theirs were in damaged
    #: records); a repair makes the index forget its counts.
    recounted: list[str] = field(default_factory=list)
    #: Bytes past each segment's last commit that are not rebuilt (cut at start).
    unacknowledged: dict[str, int] = field(default_factory=dict)
    #: Data files no record names (their stream's records were lost), and their intact events.
    orphans: dict[str, int] = field(default_factory=dict)
    #: Where a repair put the damaged journal (None: no repair, or nothing to repair).
    kept_journal: str | None = None

    @property
    def damaged(self) -> bool:
        """Whether anything is damaged (a torn tail is not damage)."""
        return bool(self.damage)

    def as_dict(self) -> dict[str, Any]:
        """The findings as plain JSON values."""
        return {**asdict(self), "damaged": self.damaged}

    def lines(self) -> list[str]:
        """The findings for people, a line each."""
        lines = [
            f"{self.data_dir}: journal.log {self.journal_bytes} bytes, "
            f"{self.journal_records} intact records"
        ]
        if self.torn_tail:
            lines.append(
                f"journal.log: a torn tail of {self.torn_tail} bytes (a crash's, never "
                "acknowledged): cut at start"
            )
        lines += [f"DAMAGED {d.file} at byte {d.offset}: {d.reason}; {d.cost}" for d in self.damage]
        lines += [f"NOT APPLIED {why}" for why in self.not_applied]
        lines += [
            f"FROM DATA {r.segment}: {r.appends} appends, {r.events} events, offsets {r.start} "
            f"to {r.end}, ingested {r.first_time} to {r.last_time} (ms): lost with the "
            "damaged records, rebuilt from its data file by a repair"
            for r in self.rebuilt
        ]
        lines += [
            f"RECOUNTED {segment}: its index counted too few events (lost appends): "
            "the counts are dropped, reads and plans count frames"
            for segment in self.recounted
        ]
        lines += [
            f"{segment}: {size} bytes past its last commit, never acknowledged: cut at start"
            for segment, size in sorted(self.unacknowledged.items())
        ]
        lines += [
            f"ORPHAN {file}: {events} intact events no surviving record names (their stream's "
            "records were lost): kept on disk, not served"
            for file, events in sorted(self.orphans.items())
        ]
        if self.kept_journal:
            lines.append(f"repaired: the damaged journal is kept as {self.kept_journal}")
        elif not self.damage:
            lines.append("no damage found")
        return lines


def check(data_dir: str) -> Findings:
    """What is damaged in the stopped store at ``data_dir`` and what it costs; changes nothing.

    Raises:
        InvalidArgumentError: ``data_dir`` is not a store's data dir.
        DataDirLockedError: a store holds it.
    """
    with _salvaging(data_dir) as (findings, _):
        return findings


def repair(data_dir: str) -> Findings:
    """Salvages what can be proved (see the module docstring); returns what it found and did.

    Does nothing when nothing is damaged. The new journal replaces the old
    one atomically; the old one is kept beside it.

    Raises:
        InvalidArgumentError: ``data_dir`` is not a store's data dir.
        DataDirLockedError: a store holds it.
        DataDirDamagedError: a data file holds less than its commits.
    """
    with _salvaging(data_dir) as (findings, catalog):
        short = [d for d in findings.damage if d.reason.startswith("holds ")]
        if short:
            msg = f"{short[0].file} {short[0].reason}: restore it from a backup"
            raise DataDirDamagedError(msg, short[0].file, short[0].offset)
        if not any(d.file == "journal.log" for d in findings.damage):
            return findings
        path = os.path.join(data_dir, "journal.log")
        kept = f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        shutil.copy2(path, kept)
        journal = Journal(path)
        try:
            journal.rewrite(encode(record) for record in catalog.snapshot())
        finally:
            journal.close()
        findings.kept_journal = os.path.basename(kept)
        return findings


@contextmanager
def _salvaging(data_dir: str) -> Iterator[tuple[Findings, Catalog]]:
    """The findings, and the catalog the intact records and the proved appends make."""
    path = os.path.join(data_dir, "journal.log")
    if not os.path.isfile(path):
        msg = f"{quoted(data_dir)} is not a store's data dir: it has no journal.log"
        raise InvalidArgumentError(msg)
    lock = DataDirLock(data_dir)
    try:
        with tempfile.TemporaryDirectory(prefix="tidemark-salvage-") as scratch:
            data, found = scan(path)
            findings = Findings(str(data_dir), len(data), len(found.records))
            # Segments' folders are made under the scratch dir: a check writes nothing.
            catalog = Catalog(scratch, OpenFiles(16))
            _replay(catalog, data, found, findings)
            known = set()
            for segment in catalog.segments():
                real = os.path.join(data_dir, os.path.relpath(segment.data_path, scratch))
                known.add(os.path.relpath(real, data_dir))
                _check_segment(segment, real, data_dir, catalog, findings)
            _orphans(data_dir, known, findings)
            yield findings, catalog
    finally:
        lock.release()


def _orphans(data_dir: str, known: set[str], findings: Findings) -> None:
    """Records the data files no segment of the catalog owns, with their intact events."""
    if not _journal_damaged(findings):
        return  # a deleted stream's files left behind: garbage, not data
    for folder, _, files in os.walk(os.path.join(data_dir, "segments")):
        for name in files:
            path = os.path.join(folder, name)
            file = os.path.relpath(path, data_dir)
            if name.endswith(".events") and file not in known:
                with open(path, "rb") as opened:
                    events, _ = _walk(_reader(opened.fileno()), 0, os.path.getsize(path))
                findings.orphans[file] = events


def _replay(catalog: Catalog, data: bytes, found: JournalScan, findings: Findings) -> None:
    """Applies every intact (or mended) record; records the damage and what no longer applies."""
    records = [(start, body(data, (start, end))) for start, end in found.records]
    if found.torn:
        findings.torn_tail = found.size - found.damage[0].start
    else:
        for stretch in found.damage:
            mended = mend(data, stretch)
            follows = len(found.records_after(stretch.end))
            if mended is not None:
                records.append((mended.start, mended.body))
                cost = f"mended: {mended.flip} was flipped; the record is whole again"
            else:
                cost = (
                    f"{stretch.end - stretch.start} bytes of records lost; {follows} intact "
                    "records follow"
                )
            reason = f"the record there {stretch.reason}"
            findings.damage.append(Damage("journal.log", stretch.start, stretch.end, reason, cost))
        records.sort(key=lambda record: record[0])
    catalog.recovering = True  # deletions leave files alone
    for start, record in records:
        try:
            catalog.apply(decode(record))
        except Exception as error:  # noqa: BLE001 - a salvage names every record it leaves out
            if not found.damage or found.torn:
                raise
            findings.not_applied.append(f"journal.log byte {start}: {error}")


def _check_segment(
    segment: Segment, path: str, data_dir: str, catalog: Catalog, findings: Findings
) -> None:
    """Checks a segment's data file frame by frame; rebuilds lost appends from it if need be."""
    if segment.wholly_truncated:
        return
    name = os.path.relpath(path, data_dir)
    size = os.path.getsize(path) if os.path.exists(path) else 0
    end = segment.committed_end
    if size < end:
        reason = f"holds {size} bytes but {end} were committed"
        findings.damage.append(Damage(name, size, end, reason, "the bytes after it are gone"))
        return
    with open(path, "rb") as file:
        read = _reader(file.fileno())
        pos = frames = 0  # from 0: the index counts the events before its head too
        whole = True
        while pos < end:
            counted, bad = _walk(read, pos, end)
            frames += counted
            if bad is None:
                break
            whole = False
            offset, reason = bad
            following = segment.boundary_after(offset) or end
            if following > segment.head:  # damage in truncated data costs nothing
                cost = (
                    f"reads answer DATA_LOSS there; its append ends at offset {following}"
                    if following < end
                    else "reads answer DATA_LOSS there; it is in the segment's last append"
                )
                reason = f"the event there {reason}"
                findings.damage.append(Damage(name, offset, following, reason, cost))
            pos = following
        miscounted = not (whole and _counted(segment) == frames)
        if size > end:
            _beyond_commits(segment, read, size, catalog, findings)
        if _journal_damaged(findings) and miscounted:
            _forget_counts(segment, catalog)
            findings.recounted.append(segment.name)


#: Reads a file's bytes between two offsets.
_Read = Callable[[int, int], bytes]


def _beyond_commits(
    segment: Segment,
    read: _Read,
    size: int,
    catalog: Catalog,
    findings: Findings,
) -> None:
    """Rebuilds the appends past the last commit when the journal lost records, else counts them."""
    start = segment.committed_end
    _, bad = _walk(read, start, size)
    proved = size if bad is None else bad[0]
    rebuilt = None
    if _journal_damaged(findings):
        rebuilt = _rebuild(segment, read(start, proved), start, catalog)
    if rebuilt is not None:
        findings.rebuilt.append(rebuilt)
    if size > segment.committed_end:
        findings.unacknowledged[segment.name] = size - segment.committed_end


def _journal_damaged(findings: Findings) -> bool:
    """Whether journal records were lost (damage no single flipped bit explains)."""
    return any(d.file == "journal.log" and not d.cost.startswith("mended") for d in findings.damage)


def _counted(segment: Segment) -> int | None:
    """How many events the segment's index counts up to its end (None: it does not know)."""
    counts = segment.index_entries()[2]
    return None if counts is None else counts[-1]


def _forget_counts(segment: Segment, catalog: Catalog) -> None:
    """Makes the segment's index forget its event counts: lost appends left them short.

    A commit at the segment's end and last time changes nothing else; reads
    and plans then walk frames to count (as for a journal that never kept counts).
    """
    end, time_ms = segment.committed_end, segment.last_write_time
    catalog.apply(Committed(segment.name, end, time_ms, REPAIR_WRITER, -1, (), None))


def _rebuild(segment: Segment, data: bytes, start: int, catalog: Catalog) -> Rebuilt | None:
    """Commits the appends whose intact frames ``data`` holds (from ``start``) to ``segment``.

    Stops before an append that would make the watermark step back (a segment
    sealed after them promised no data after its seal time).
    """
    columns = decode_columns(data, start)
    first = len(columns.offsets)
    appends = events = 0
    i = 0
    while i < len(columns.offsets):
        time_ms = columns.ingestion_times[i]
        j = i
        while j < len(columns.offsets) and columns.ingestion_times[j] == time_ms:
            j += 1
        if time_ms - 1 < segment.snapshot().watermark:
            break
        keys = columns.routing_keys[i:j]
        inside = checkpoints(
            columns.offsets[i],
            columns.payloads[i:j],
            [k or "" for k in keys] if any(keys) else None,
        )
        record = Committed(
            segment.name, columns.ends[j - 1], time_ms, REPAIR_WRITER, -1, tuple(inside), j - i
        )
        catalog.apply(record)
        first = min(first, i)
        appends += 1
        events += j - i
        i = j
    if not appends:
        return None
    times = columns.ingestion_times
    return Rebuilt(
        segment.name, start, segment.committed_end, appends, events, times[first], times[i - 1]
    )


def _reader(fd: int) -> _Read:
    return lambda start, stop: os.pread(fd, stop - start, start)


def _walk(read: _Read, start: int, stop: int) -> tuple[int, tuple[int, str] | None]:
    """The intact frames from ``start`` on: how many, and the first that is not and why.

    The walk ends at ``stop`` or at that frame (None: it ends at ``stop``).
    """
    pos = start
    frames = 0
    while pos < stop:
        chunk = read(pos, min(stop, pos + _WINDOW))
        if not chunk:
            return frames, (pos, "is missing: the file ends there")
        intact = intact_prefix(chunk, pos)
        frames += intact.frames
        if intact.reason is None or intact.length:
            pos += intact.length
            continue
        if len(chunk) >= HEADER.size:  # a whole frame larger than the window: read it whole
            frame_end = pos + HEADER.size + HEADER.unpack_from(chunk)[0]
            if pos + len(chunk) < frame_end <= stop:
                if intact_prefix(read(pos, frame_end), pos).reason is None:
                    pos = frame_end
                    frames += 1
                    continue
        return frames, (pos, intact.reason)
    return frames, None
