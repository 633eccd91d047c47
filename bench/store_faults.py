"""Store fault suite: kill -9 during acknowledged appends, and a full disk.

    python bench/store_faults.py                 # 20 kill -9 cycles, then the full disk
    python bench/store_faults.py --cycles 3      # shorter

Kill -9: a real server subprocess on loopback; two writers append batches of
five events (each numbered by its writer, no retries) to a two-segment stream
until the server is killed with SIGKILL at a random moment; the server is
restarted on the same data dir, every segment is read back and compared with
what was acknowledged (the batch in flight at the kill may or may not be
there, whole), then each writer retries its unanswered batch and goes on.
Lost = acknowledged events missing; duplicated = events stored more than once;
the last check compares each segment with every acknowledged event in order.

Full disk (needs root, for ``mount -t tmpfs``): the server's data dir is a
4 MiB tmpfs with a 1 MiB ballast file; a writer appends 16 KiB events until
the store refuses one with RESOURCE_EXHAUSTED, checks every acknowledged
event reads back, deletes the ballast and appends again without a restart,
then restarts the server and reads everything once more.

Idle restart: 50 idle streams ticked on a synthetic clock (in process), then
the time a restart takes and the journal records it replays.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from connector import StoreClient  # noqa: E402
from connector.clock import ManualClock  # noqa: E402
from connector.errors import ResourceExhaustedError, TidemarkError  # noqa: E402
from connector.framing import iter_frames  # noqa: E402
from connector.reader.planning import SegmentRange, read_range  # noqa: E402
from connector.store import SegmentStore, StoreConfig  # noqa: E402
from connector.store.journal import Journal  # noqa: E402


def start_server(data_dir: pathlib.Path, log: pathlib.Path) -> tuple[subprocess.Popen[bytes], str]:
    """A ``python -m connector.server`` on 127.0.0.1:0 and its URI."""
    command = [sys.executable, "-m", "connector.server", "--data-dir", str(data_dir)]
    command += ["--listen", "127.0.0.1:0", "--max-watermark-lag-ms", "600000"]
    with open(log, "ab") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err)
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    if not line.startswith("listening on "):
        msg = f"the server did not start: {line!r} (see {log})"
        raise RuntimeError(msg)
    return process, "tidemark://" + line.removeprefix("listening on ")


def read_all(client: StoreClient, segment: str) -> list[bytes]:
    """Every event of ``segment``, in order."""
    end = client.segment_info(segment).write_offset
    return [
        frame.payload
        for result in read_range(client, SegmentRange(segment, 0, end))
        for frame in iter_frames(result.data)
    ]


class Writer(threading.Thread):
    """Appends numbered batches of five to one segment until an append fails."""

    def __init__(self, uri: str, segment: str, name: str, first: int):
        super().__init__(daemon=True)
        self.uri, self.segment, self.writer, self.next = uri, segment, name, first
        self.acked: list[bytes] = []
        self.in_flight: list[bytes] = []

    def run(self) -> None:
        """Appends until the first failure (no retries: that batch is the one in flight)."""
        client = StoreClient(self.uri, retry_timeout_s=0.0, call_timeout_s=10.0)
        try:
            while True:
                events = [f"{self.writer}#{self.next + i}".encode() for i in range(5)]
                self.in_flight = events
                client.append(self.segment, self.writer, self.next, events)
                self.acked += events
                self.in_flight = []
                self.next += 5
        except TidemarkError:
            pass
        finally:
            client.close()


def kill_cycles(cycles: int, work: pathlib.Path) -> dict[str, int]:
    """Runs ``cycles`` kill -9 cycles; returns acknowledged, lost and duplicated counts."""
    data_dir, log = work / "kill", work / "kill.log"
    process, uri = start_server(data_dir, log)
    with StoreClient(uri, retry_timeout_s=5.0) as client:
        client.create_scope("f")
        segments = [s.segment for s in client.create_stream("f", "s", 2).segments]
    acked: dict[str, list[bytes]] = {s: [] for s in segments}
    numbers = dict.fromkeys(segments, 0)
    totals = dict.fromkeys(
        ["acknowledged", "lost", "duplicated", "out_of_order_segments", "in_flight_kept"], 0
    )
    totals["cycles"] = cycles
    rng = random.Random(7)
    for _ in range(cycles):
        writers = [Writer(uri, s, f"w{n}", numbers[s]) for n, s in enumerate(segments)]
        for writer in writers:
            writer.start()
        time.sleep(rng.uniform(0.3, 1.5))
        process.kill()
        process.wait()
        for writer in writers:
            writer.join(30)
        process, uri = start_server(data_dir, log)
        with StoreClient(uri, retry_timeout_s=5.0) as client:
            for writer in writers:
                acked[writer.segment] += writer.acked
                stored = read_all(client, writer.segment)
                expected = acked[writer.segment]
                kept = stored[len(expected) :] == writer.in_flight and writer.in_flight != []
                totals["in_flight_kept"] += kept
                totals["lost"] += len(set(expected) - set(stored))
                totals["duplicated"] += len(stored) - len(set(stored))
                if writer.in_flight:  # the writer retries its unanswered batch
                    client.append(writer.segment, writer.writer, writer.next, writer.in_flight)
                    acked[writer.segment] += writer.in_flight
                    writer.next += 5
                numbers[writer.segment] = writer.next
    with StoreClient(uri, retry_timeout_s=5.0) as client:
        for segment in segments:
            stored = read_all(client, segment)
            totals["lost"] += len(set(acked[segment]) - set(stored))
            totals["duplicated"] += len(stored) - len(set(stored))
            totals["acknowledged"] += len(acked[segment])
            totals["out_of_order_segments"] += stored != acked[segment]
    process.kill()
    process.wait()
    return totals


def full_disk(work: pathlib.Path) -> dict[str, object]:
    """Fills a 4 MiB tmpfs through the server; returns what was acknowledged, lost and resumed."""
    mount = work / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        ballast = mount / "ballast"
        ballast.write_bytes(b"\0" * (1 << 20))
        process, uri = start_server(mount / "data", work / "disk.log")
        acked: list[bytes] = []
        status = ""
        with StoreClient(uri, retry_timeout_s=0.0) as client:
            client.create_scope("f")
            client.create_stream("f", "s", 1)
            number = 0
            while True:
                event = f"{number:08d}".encode() * 2048
                try:
                    client.append("f/s/0", "w", number, [event])
                except ResourceExhaustedError as refused:
                    status = str(refused)
                    break
                acked.append(event)
                number += 1
            readable_when_full = read_all(client, "f/s/0") == acked
            ballast.unlink()
            started = time.monotonic()
            event = f"{number:08d}".encode() * 2048
            client.append("f/s/0", "w", number, [event])
            resumed_s = time.monotonic() - started
            acked.append(event)
        process.kill()
        process.wait()
        process, uri = start_server(mount / "data", work / "disk.log")
        with StoreClient(uri, retry_timeout_s=5.0) as client:
            after_restart = read_all(client, "f/s/0")
        process.kill()
        process.wait()
        return {
            "acknowledged": len(acked),
            "lost": len(set(acked) - set(after_restart)),
            "readable_when_full": readable_when_full,
            "resumed_without_restart_s": round(resumed_s, 3),
            "restart_ok": after_restart == acked,
            "refusal": status,
        }
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def idle_restart(work: pathlib.Path, rounds: int) -> dict[str, object]:
    """50 idle one-segment streams ticked ``rounds`` times on a synthetic clock, then restarted.

    One round is one idle tick of every segment, ``max_watermark_lag_ms`` + 1
    apart (at the default 10 s lag, 30 days are 259,200 rounds); compaction
    keeps the journal bounded, so the restart time measured after ``rounds``
    is the one after any longer idle time.
    """
    clock = ManualClock(1_000)
    config = StoreConfig(str(work / "idle"), clock=clock, polling_period_ms=None)
    store = SegmentStore(config)
    store.create_scope("idle")
    for number in range(50):
        store.create_stream("idle", f"s{number}", 1)
    for _ in range(rounds):
        clock.advance(config.max_watermark_lag_ms + 1)
        store.advance_idle_segments()
    watermarks = [store.segment_info(f"idle/s{n}/0").watermark for n in range(50)]
    store.close()
    journal = Journal(os.path.join(config.data_dir, "journal.log"))
    records = sum(1 for _ in journal.replay())
    journal.close()
    started = time.monotonic()
    store = SegmentStore(config)
    restart_s = time.monotonic() - started
    same = watermarks == [store.segment_info(f"idle/s{n}/0").watermark for n in range(50)]
    store.close()
    return {
        "idle_ticks_written": rounds * 50,
        "idle_equivalent_hours": round(rounds * (config.max_watermark_lag_ms + 1) / 3.6e6, 1),
        "journal_records_at_restart": records,
        "restart_s": round(restart_s, 3),
        "watermarks_same_after_restart": same,
    }


def main() -> None:
    """Runs the kill -9 cycles and the full disk, printing the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20, help="kill -9 cycles (default 20)")
    parser.add_argument("--idle-rounds", type=int, default=5_000, help="idle tick rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidemark-faults-") as work:
        started = time.monotonic()
        print("kill -9:", kill_cycles(args.cycles, pathlib.Path(work)), flush=True)
        print("full disk:", full_disk(pathlib.Path(work)), flush=True)
        print("idle restart:", idle_restart(pathlib.Path(work), args.idle_rounds), flush=True)
        print(f"took {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
