"""Flipped bits in a stopped file store's files: nothing acknowledged vanishes without a word.

A real server process stores 60 appends of 10 events on each of two
segments and a reader group's state, and stops (SIGTERM); a second data dir
has its journal compacted and 8 appends more. Then, each on a fresh copy, a
seeded set of single-byte flips across ``journal.log``, the compacted
journal and the data files, a zeroed 4 KiB page in the journal and in a data
file, and a torn tail; after each, ``python -m connector.server`` is started
on the copy. The store must either serve every acknowledged event, or refuse
to start naming the damaged file and offset (exit code 5, every file left as
it was), or serve every event before the damage and answer the read at the
damaged offset with ``DATA_LOSS`` (naming the segment, the offset and where
where its append ends, from which reading goes on). It never serves fewer
events without saying so. A torn tail (an append a crash cut short, never
acknowledged) is still cut quietly.
"""

from __future__ import annotations

import os
import pathlib
import random
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from connector import StoreClient, StreamManager
from connector.cli import cli
from connector.cli.app import EXIT_DATA_LOSS
from connector.errors import DataLossError
from connector.framing import encode_frames, iter_frames
from connector.server.cli import DATA_DIR_DAMAGED_EXIT
from connector.store import SegmentStore, StoreConfig

pytestmark = pytest.mark.slow

SEED = 20261201
SEGMENTS = ("p/s/0", "p/s/1")
APPENDS = 60
EVENTS = 10
#: Appends per segment stored after the journal was compacted.
LATER_APPENDS = 8


@dataclass(frozen=True)
class Fault:
    """One damage to do to a copy of a stopped store's ``file`` (relative to its data dir).

    ``kind`` is ``flip`` (XOR the byte at ``fraction`` of the file with
    ``mask``), ``zeros`` (the 4 KiB page at ``page``) or ``torn`` (an append
    a crash cut short).
    """

    store: str
    file: str
    kind: str
    fraction: float = 0.0
    mask: int = 0
    page: int = 0

    @property
    def name(self) -> str:
        where = f"{self.fraction:.3f}" if self.kind == "flip" else self.kind
        return f"{self.store}-{self.file.rpartition('/')[2]}-{where}"

    def offset(self, data_dir: pathlib.Path) -> int:
        """Where the damage starts in the file."""
        if self.kind == "flip":
            return int(self.fraction * (data_dir / self.file).stat().st_size)
        if self.kind == "zeros":
            return self.page * 4096
        return (data_dir / self.file).stat().st_size


@dataclass
class StoppedStore:
    """A stopped store's data dir and the events acknowledged in each segment, in order."""

    data_dir: pathlib.Path
    acked: dict[str, list[bytes]]


def _payload(segment: str, append: int, event: int) -> bytes:
    return f"{segment}|{append:03d}|{event:02d}|".encode() + b"x" * (event * 3)


def _start(data_dir: pathlib.Path, log: pathlib.Path) -> tuple[subprocess.Popen[bytes], str | None]:
    """Starts a server on ``data_dir``; its process and address (None: it exited instead)."""
    command = [sys.executable, "-m", "connector.server", "--data-dir", str(data_dir)]
    command += ["--listen", "127.0.0.1:0", "--polling-period-ms", "600000"]
    with open(log, "ab") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err)
    assert process.stdout is not None
    buffer = b""
    deadline = time.monotonic() + 30
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            assert left > 0 and selector.select(left), f"server on {data_dir} silent for 30 s"
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                process.wait(timeout=10)
                process.stdout.close()
                return process, None
            buffer += chunk
    return process, buffer.split(b"\n", 1)[0].decode().removeprefix("listening on ")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    if process.stdout is not None:
        process.stdout.close()


def _append(uri: str, acked: dict[str, list[bytes]], appends: int, start: int) -> None:
    with StoreClient(uri) as client:
        for number in range(start, start + appends):
            for segment in SEGMENTS:
                batch = [_payload(segment, number, e) for e in range(EVENTS)]
                client.append(segment, "w", number * EVENTS, batch)
                acked[segment] += batch
        client.compare_and_set_state(
            "readergroup/p/g", client.get_state("readergroup/p/g").revision, b"{}"
        )


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StoppedStore]:
    """A stopped store (``plain``) and one whose journal was compacted (``compacted``)."""
    work = tmp_path_factory.mktemp("flips")
    plain = work / "plain"
    acked: dict[str, list[bytes]] = {s: [] for s in SEGMENTS}
    process, address = _start(plain, work / "template.log")
    assert address is not None
    with StoreClient(f"tidemark://{address}") as client:
        StreamManager(client).create_scope("p")
        client.create_stream("p", "s", len(SEGMENTS))
    _append(f"tidemark://{address}", acked, APPENDS, 0)
    _stop(process)
    compacted = work / "compacted"
    shutil.copytree(plain, compacted)
    SegmentStore(StoreConfig(data_dir=str(compacted), compact_after_records=1)).close()
    later = {s: list(events) for s, events in acked.items()}
    process, address = _start(compacted, work / "template.log")
    assert address is not None
    _append(f"tidemark://{address}", later, LATER_APPENDS, APPENDS)
    _stop(process)
    journal = (compacted / "journal.log").read_bytes()
    assert b'"op":"stream_state"' in journal[:4096], "the journal was not compacted"
    return {"plain": StoppedStore(plain, acked), "compacted": StoppedStore(compacted, later)}


def _faults() -> list[Fault]:
    """The seeded set of damages."""
    rng = random.Random(SEED)
    faults = []
    for store, file, count in [
        ("plain", "journal.log", 4),
        ("compacted", "journal.log", 3),
        ("plain", "segments/p/s/0.events", 2),
        ("plain", "segments/p/s/1.events", 1),
        ("compacted", "segments/p/s/1.events", 1),
    ]:
        faults += [
            Fault(store, file, "flip", rng.random(), 1 << rng.randrange(8)) for _ in range(count)
        ]
    return [
        *faults,
        Fault("plain", "journal.log", "zeros", page=1),
        Fault("plain", "segments/p/s/0.events", "zeros", page=2),
        Fault("plain", "journal.log", "torn"),
    ]


def _damage(data_dir: pathlib.Path, fault: Fault, offset: int) -> None:
    path = data_dir / fault.file
    data = bytearray(path.read_bytes())
    if fault.kind == "flip":
        data[offset] ^= fault.mask
    elif fault.kind == "zeros":
        assert len(data) > offset + 4096, f"{fault.file} ends inside the page"
        data[offset : offset + 4096] = bytes(4096)
    else:  # an append a crash cut short: its frames on disk, its commit half written
        record = b'{"op":"commit","seg":"p/s/0","end":999999,"t":1,"w":"w","e":9}'
        data += len(record).to_bytes(4, "little") + b"\x00\x00\x00\x00" + record[:20]
        with open(data_dir / "segments/p/s/0.events", "ab") as events:
            events.write(encode_frames([b"never acknowledged"] * 3, 1))
    path.write_bytes(bytes(data))


def _files(data_dir: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(data_dir)): p.read_bytes()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def _read_through(
    client: StoreClient, segment: str
) -> tuple[list[tuple[int, bytes]], list[DataLossError]]:
    """Every event of ``segment`` served, with its offset, and each DATA_LOSS met on the way.

    After a DATA_LOSS the read goes on where it says the damaged event's append ends.
    """
    served: list[tuple[int, bytes]] = []
    losses: list[DataLossError] = []
    offset = 0
    end = client.segment_info(segment).write_offset
    while offset < end:
        try:
            result = client.read(segment, offset, 1 << 16)
        except DataLossError as loss:
            losses.append(loss)
            assert loss.offset == offset, loss
            offset = loss.next_offset if loss.next_offset >= 0 else end
            continue
        served += [(f.offset, f.payload) for f in iter_frames(result.data, result.offset)]
        offset = result.next_offset
    return served, losses


def _offsets(events: list[bytes]) -> list[int]:
    """Where each event starts in its segment (no routing keys)."""
    offsets, at = [], 0
    for event in events:
        offsets.append(at)
        at += len(encode_frames([event], 0))
    return offsets


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


FAULTS = _faults()


def _assert_served(
    reader: StoreClient | SegmentStore, stopped: StoppedStore, fault: Fault, damaged_at: int
) -> None:
    """Every acknowledged event is served, or inside a stretch a DATA_LOSS named at the damage."""
    for segment in SEGMENTS:
        acked = stopped.acked[segment]
        offsets = _offsets(acked)
        end = reader.segment_info(segment).write_offset
        served, losses = _read_through(reader, segment)
        lost = [(x.offset, x.next_offset if x.next_offset >= 0 else end) for x in losses]
        kept = [
            (o, p)
            for o, p in zip(offsets, acked, strict=True)
            if not any(start <= o < stop for start, stop in lost)
        ]
        assert served == kept, f"{segment}: fewer events, nothing said"
        damaged_here = fault.file == f"segments/{segment}.events" and fault.kind != "torn"
        assert bool(losses) == damaged_here, f"{segment}: {losses or 'nothing said'}"
        width = 4096 if fault.kind == "zeros" else 1
        for loss, (start, stop) in zip(losses, lost, strict=True):
            assert loss.segment == segment and repr(segment) in str(loss)
            assert start < damaged_at + width and damaged_at < stop, (damaged_at, loss)


def _assert_refused(
    process: subprocess.Popen[bytes], message: str, fault: Fault, damaged_at: int
) -> int:
    """The start was refused in one line naming the damaged file and offset; returns the offset."""
    assert process.returncode == DATA_DIR_DAMAGED_EXIT, message
    line = message.strip().splitlines()[-1]
    assert line.startswith("tidemark-server: error: journal "), message
    assert fault.file == "journal.log" and fault.kind != "torn", f"refused: {line}"
    named = int(line.split(" is damaged at byte ")[1].split(":")[0])
    assert named <= damaged_at, line
    return named


def _repaired(data_dir: pathlib.Path, named: int) -> str:
    """Checks and repairs a refused data dir with tidemarkctl; returns what the check said."""
    checked = CliRunner().invoke(cli, ["data-dir", "check", str(data_dir)])
    assert checked.exit_code == EXIT_DATA_LOSS, checked.output
    assert f"DAMAGED journal.log at byte {named}:" in checked.output, checked.output
    repaired = CliRunner().invoke(cli, ["data-dir", "repair", str(data_dir)])
    assert repaired.exit_code == 0, repaired.output
    assert "the damaged journal is kept as journal.log.damaged-" in repaired.output
    return checked.output


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_a_damaged_store_serves_every_acknowledged_event_or_says_what_is_lost(
    fault: Fault,
    stores: dict[str, StoppedStore],
    tmp_path: pathlib.Path,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    stopped = stores[fault.store]
    data_dir = tmp_path / "data"
    shutil.copytree(stopped.data_dir, data_dir)
    damaged_at = fault.offset(data_dir)
    _damage(data_dir, fault, damaged_at)
    before = _files(data_dir)
    log = tmp_path / "server.log"
    process, address = _start(data_dir, log)
    processes.append(process)
    message = log.read_text()
    if address is None:
        named = _assert_refused(process, message, fault, damaged_at)
        assert _files(data_dir) == before, "a refused start changed the data dir"
        # The way on: check, repair, and every acknowledged event is back.
        report = _repaired(data_dir, named)
        assert "ORPHAN" not in report, report
        with SegmentStore(StoreConfig(data_dir=str(data_dir), polling_period_ms=None)) as store:
            _assert_served(store, stopped, Fault(fault.store, "none", "none"), damaged_at)
        return
    with StoreClient(f"tidemark://{address}", retry_timeout_s=5.0) as client:
        _assert_served(client, stopped, fault, damaged_at)
    if fault.kind == "torn":
        assert "cutting a torn tail" in message and "unacknowledged bytes" in message, message
    else:
        assert fault.file != "journal.log", "a damaged journal was served"
    _stop(process)
