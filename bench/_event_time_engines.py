"""What the engines' event-time latency benchmarks share: a writer that asserts, and the figure.

Not a benchmark itself (``run.py`` runs only ``*_bench.py`` files). A store
server subprocess (its default idle ticks); a writer thread appends one
reading to each segment of a 2-segment stream every ``interval`` and then
asserts its event time (``EventWriter.note_time``), recording when each
assertion was acknowledged. An engine's job reports when its watermark
reached a time; the latency of an assertion is the wall time its engine's
watermark first reached its time, minus the wall time of its acknowledgement.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from _support import markdown_table, percentile

from connector import EventWriter, JsonSerializer, StoreClient

__all__ = ["AssertingWriter", "latency_rows"]

#: The first seconds of a run are left out: the engine's job is still starting.
WARM_UP_S = 15.0


@dataclass
class AssertingWriter:
    """A thread writing a reading per segment and asserting its time every ``interval_s``."""

    uri: str
    stream: str
    interval_s: float
    acks: list[tuple[int, float]] = field(default_factory=list)  # (asserted time, ack wall time)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> AssertingWriter:
        self._thread = threading.Thread(target=self._run, name="asserting-writer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with StoreClient(self.uri) as client:
            writer = EventWriter(client, self.stream, JsonSerializer(), writer_id="bench-sensor")
            while not self._stop.is_set():
                now = int(time.time() * 1000)
                for key in ("a", "b"):  # one reading to each segment, most likely
                    writer.write_event({"ts": now, "key": key}, routing_key=key)
                writer.note_time(now)
                self.acks.append((now, time.time()))
                self._stop.wait(self.interval_s)
            writer.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def latency_rows(
    acks: list[tuple[int, float]], reached: list[tuple[float, int]], began: float
) -> tuple[list[list[str]], list[float]]:
    """The figure's table: for each assertion after the warm-up, when the engine reached it.

    ``reached`` is (wall time, engine watermark) in the order observed.
    """
    latencies = []
    for asserted, acked in acks:
        if acked - began < WARM_UP_S:
            continue
        first = next((wall for wall, mark in reached if mark >= asserted), None)
        if first is not None:
            latencies.append((first - acked) * 1000)
    rows = [
        ["assertions measured", "p50 ms", "p99 ms", "max ms"],
        [
            f"{len(latencies):,}",
            f"{percentile(latencies, 50):,.0f}",
            f"{percentile(latencies, 99):,.0f}",
            f"{max(latencies, default=float('nan')):,.0f}",
        ],
    ]
    return rows, latencies


def table(rows: list[list[str]]) -> str:
    """The rows as markdown."""
    return markdown_table(rows)
