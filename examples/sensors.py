"""The sensor scenario of the seed's EventTimeITCase: A on time, B early, C late.

Each sensor stamps its readings with an event time (``ts``) relative to the
moment it writes: A a little behind (on time), B ahead of the ingestion clock
(early), C further behind than the event-time lag allows (late: a slow
sensor). Read with ingestion-time watermarks minus ``LAG_MS``, A's and B's
readings come out in event-time order and C's are reported late.

In the event-time domain each sensor writes with a writer of its own that
asserts its event time after each reading (:func:`write_asserting_round`):
the watermark then waits for C and nothing is late; once C marks itself
idle (or the store times it out) the watermark moves on without it. A
writer that has not asserted yet holds nobody back, so every sensor joins
first (:func:`join_asserting`): a reader reading while a round is written
would otherwise see A's and B's assertions before C's first reading, and
find that reading late.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from connector.client import EventWriter
from connector.clock import utc_text
from connector.reader import EventReader, EventTimeOrderer

__all__ = [
    "LAG_MS",
    "OFFSETS_MS",
    "LiveOrdering",
    "OrderedOutput",
    "join_asserting",
    "late_line",
    "reading_line",
    "run_sensors",
    "watermark_line",
    "write_asserting_round",
    "write_round",
]

#: Event time minus ingestion time, per sensor.
OFFSETS_MS = {"A": -200, "B": 1_500, "C": -4_000}
#: The max event-time lag: readings up to this far behind are on time.
LAG_MS = 1_000

_log = logging.getLogger("examples.sensors")


def watermark_line(watermark: int) -> str:
    """How the demos print a watermark advance: epoch ms, and the UTC time beside it."""
    return f"Advancing the event time watermark: Watermark @ {watermark}  {utc_text(watermark)}"


def reading_line(ts: int, sensor: str, seq: int) -> str:
    """How the demos print a released reading (indented under its watermark)."""
    return f"  ({ts},{sensor})  {utc_text(ts)}  seq {seq}"


def late_line(ts: int, sensor: str, seq: int) -> str:
    """How the demos print a late reading: reported, never dropped."""
    return f"Late (reported, not dropped): ({ts},{sensor})  {utc_text(ts)}  seq {seq}"


def write_round(
    writer: EventWriter[Any], seq: int, now_ms: Callable[[], int]
) -> list[dict[str, Any]]:
    """Writes one reading per sensor, durable on return."""
    written = []
    for sensor, offset in OFFSETS_MS.items():
        reading = {"sensor": sensor, "seq": seq, "ts": now_ms() + offset}
        _log.debug("Writing: (%d,%s)", reading["ts"], sensor)
        writer.write_event(reading, routing_key=sensor)
        written.append(reading)
    writer.flush()
    return written


def join_asserting(
    writers: Mapping[str, EventWriter[Any]],
    now_ms: Callable[[], int],
    sensors: Iterable[str] | None = None,
) -> None:
    """Each sensor (each of ``sensors``) asserts just below any reading it will write; durable.

    A sensor's readings are stamped ``now + OFFSETS_MS[sensor]`` with a clock
    that never goes back, so it asserts ``now + offset - 1``: from then on it
    holds the watermark back for its first reading, whoever writes before it.
    """
    for sensor in sensors if sensors is not None else writers:
        writers[sensor].note_time(now_ms() + OFFSETS_MS[sensor] - 1)


def write_asserting_round(
    writers: Mapping[str, EventWriter[Any]],
    seq: int,
    now_ms: Callable[[], int],
    sensors: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Writes one reading per sensor (each of ``sensors``) with its own writer, which then asserts.

    A sensor's readings rise in event time, so after each it asserts its
    reading's time (:meth:`EventWriter.note_time`): none of its later
    readings is at or before it. Durable on return.
    """
    written = []
    for sensor in sensors if sensors is not None else writers:
        reading = {"sensor": sensor, "seq": seq, "ts": now_ms() + OFFSETS_MS[sensor]}
        _log.debug("Writing: (%d,%s)", reading["ts"], sensor)
        writers[sensor].write_event(reading, routing_key=sensor)
        writers[sensor].note_time(reading["ts"])
        written.append(reading)
    return written


@dataclass
class OrderedOutput:
    """What the ordering produced: readings written, released in order, late, watermarks."""

    written: list[dict[str, Any]] = field(default_factory=list)
    released: list[dict[str, Any]] = field(default_factory=list)
    late: list[dict[str, Any]] = field(default_factory=list)
    watermarks: list[int] = field(default_factory=list)
    events_read: int = 0


def run_sensors(
    writer: EventWriter[Any],
    reader: EventReader[Any],
    now_ms: Callable[[], int],
    pause: Callable[[], None],
    rounds: int,
    on_release: Callable[[dict[str, Any]], None] | None = None,
    max_reads: int = 100_000,
    on_advance: Callable[[int, list[dict[str, Any]]], None] | None = None,
    on_late: Callable[[dict[str, Any]], None] | None = None,
) -> OrderedOutput:
    """Writes ``rounds`` rounds of readings while a live reader orders them.

    After each round time passes (``pause``: the test moves its synthetic
    clock, the demo sleeps) and the reader reads what was written, so it is
    live as in the seed's EventTimeITCase. Then it reads on, letting time
    pass, until every reading was released or reported late.

    ``on_release`` sees each reading released, ``on_advance`` each watermark
    that released any (with them), ``on_late`` each late reading.
    """
    ordering = LiveOrdering(reader, pause, on_release, max_reads, on_advance, on_late)
    for seq in range(rounds):
        ordering.output.written.extend(write_round(writer, seq, now_ms))
        pause()
        ordering.read_all_written()
    ordering.read_until_settled()
    return ordering.output


class LiveOrdering:
    """A live reader feeding an :class:`EventTimeOrderer`; what it released, late, saw.

    :meth:`read_until` reads (letting time pass with ``pause`` when a read
    times out) until a condition holds, in at most ``max_reads`` reads.
    """

    def __init__(
        self,
        reader: EventReader[Any],
        pause: Callable[[], None],
        on_release: Callable[[dict[str, Any]], None] | None = None,
        max_reads: int = 100_000,
        on_advance: Callable[[int, list[dict[str, Any]]], None] | None = None,
        on_late: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.reader = reader
        self.output = OrderedOutput()
        self.flagged_late: list[dict[str, Any]] = []
        self._pause = pause
        self._on_release = on_release
        self._max_reads = max_reads
        self._on_advance = on_advance
        self._on_late = on_late
        self._reads = 0
        self.orderer: EventTimeOrderer[dict[str, Any]] = EventTimeOrderer(on_late=self._late)
        if reader.last_watermark is not None:
            self.orderer.advance(reader.last_watermark)  # what the reader saw before we started

    def _late(self, item: Any) -> None:
        self.output.late.append(item.value)
        if self._on_late is not None:
            self._on_late(item.value)

    def read_all_written(self) -> None:
        """Reads until every reading written so far was read."""
        output = self.output
        self.read_until(lambda: output.events_read >= len(output.written))

    def read_until_settled(self) -> None:
        """Reads until every reading written was released or reported late."""
        output = self.output
        self.read_until(lambda: len(output.released) + len(output.late) >= len(output.written))

    def read_until(self, done: Callable[[], bool]) -> None:
        """Reads until ``done()``; fails after ``max_reads`` reads."""
        output = self.output
        while not done():
            self._reads += 1
            if self._reads > self._max_reads:
                msg = f"no progress in {self._max_reads} reads: {len(output.released)} released"
                raise AssertionError(msg)
            read = self.reader.read_next_event(50)
            if read is None:
                self._pause()
            elif read.is_watermark:
                assert read.watermark is not None
                output.watermarks.append(read.watermark)
                released = [item.value for item in self.orderer.advance(read.watermark)]
                if released and self._on_advance is not None:
                    self._on_advance(read.watermark, released)
                for value in released:
                    output.released.append(value)
                    if self._on_release is not None:
                        self._on_release(value)
            else:
                assert read.event_time is not None
                output.events_read += 1
                if read.late:
                    self.flagged_late.append(read.event)
                self.orderer.add(read.event, read.event_time)
