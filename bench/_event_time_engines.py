"""What the engines' event-time latency benchmarks share: a writer that asserts, and the figures.

Not a benchmark itself (the benchmarks are listed in :mod:`bench.registry`). A
store server subprocess (its default idle ticks); a writer thread appends one
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

from bench.figures import Percentiles, Target
from connector import EventWriter, JsonSerializer, StoreClient

__all__ = ["AssertingWriter", "EngineLatencies", "latencies"]

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


def latencies(
    acks: list[tuple[int, float]], reached: list[tuple[float, int]], began: float
) -> list[float]:
    """For each assertion after the warm-up that the engine reached: ms from its ack to that.

    ``reached`` is (wall time, engine watermark) in the order observed.
    """
    found = []
    for asserted, acked in acks:
        if acked - began < WARM_UP_S:
            continue
        first = next((wall for wall, mark in reached if mark >= asserted), None)
        if first is not None:
            found.append((first - acked) * 1000)
    return found


@dataclass(frozen=True)
class EngineLatencies(Percentiles):
    """An engine's run: the writer's settings, and each assertion's latency (ms)."""

    interval_ms: int
    seconds: float
    values_ms: list[float]
    software: tuple[str, ...] = ()
    warm_up_s: float = WARM_UP_S

    @property
    def targets(self) -> dict[str, Target]:
        """None: the figure is reported, not judged."""
        return {}
