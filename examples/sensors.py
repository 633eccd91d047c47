"""The sensor scenario of the seed's EventTimeITCase: A on time, B early, C late.

Each sensor stamps its readings with an event time (``ts``) relative to the
moment it writes: A a little behind (on time), B ahead of the ingestion clock
(early), C further behind than the event-time lag allows (late). Read with
ingestion-time watermarks minus ``LAG_MS``, A's and B's readings come out in
event-time order and C's are reported late.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connector.client import EventWriter
from connector.clock import utc_text
from connector.reader import EventReader, EventTimeOrderer

__all__ = [
    "LAG_MS",
    "OFFSETS_MS",
    "OrderedOutput",
    "late_line",
    "reading_line",
    "run_sensors",
    "watermark_line",
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
    output = OrderedOutput()

    def late(item: Any) -> None:
        output.late.append(item.value)
        if on_late is not None:
            on_late(item.value)

    orderer: EventTimeOrderer[dict[str, Any]] = EventTimeOrderer(on_late=late)
    if reader.last_watermark is not None:
        orderer.advance(reader.last_watermark)  # what the reader saw before we started
    reads = 0

    def read_until(done: Callable[[], bool]) -> None:
        nonlocal reads
        while not done():
            reads += 1
            if reads > max_reads:
                msg = f"no progress in {max_reads} reads: {len(output.released)} released"
                raise AssertionError(msg)
            read = reader.read_next_event(50)
            if read is None:
                pause()
            elif read.is_watermark:
                assert read.watermark is not None
                output.watermarks.append(read.watermark)
                released = [item.value for item in orderer.advance(read.watermark)]
                if released and on_advance is not None:
                    on_advance(read.watermark, released)
                for value in released:
                    output.released.append(value)
                    if on_release is not None:
                        on_release(value)
            else:
                assert read.event_time is not None
                output.events_read += 1
                orderer.add(read.event, read.event_time)

    for seq in range(rounds):
        output.written.extend(write_round(writer, seq, now_ms))
        pause()
        read_until(lambda: output.events_read >= len(output.written))
    read_until(lambda: len(output.released) + len(output.late) >= len(output.written))
    return output
