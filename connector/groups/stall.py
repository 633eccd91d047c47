"""Why a reader group's watermark stands still: what holds it, since when, and what will move it.

Seed 001's *visibility*: "if a message is stuck, the watermark cannot
advance", so a user must be able to find what is stuck. :func:`why` names,
in the ingestion-time domain, the segment at the group's minimum and, in
the event-time domain, the segment and the writer at it: since when it has
stood there, how far behind the next segment it is, and what will move it
(an idle tick due, a silent writer marked idle, a segment nobody in the
group reads, a reader behind whose lease lapses). A pure function over
plain values (the group's record and unread events, the tails, the
writers' assertions, the store's timing, a clock); ``tidemarkctl
watermarks --why``, the server's ``reader_group_watermark_holder`` metric
and the engines' stall logs print what it returns.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from connector.clock import utc_text
from connector.groups.lag import GroupLag, SegmentLag
from connector.groups.progress import writers_assert
from connector.groups.record import GroupRecord
from connector.groups.state import NO_WRITER, GroupState, group_event_time
from connector.model import SegmentTail, WriterAssertion

__all__ = ["Cause", "Holder", "Stall", "StoreTiming", "event_time_segment", "why"]

#: A writer not heard from for this long (ms) is silent, not merely behind.
_SILENT_AFTER_MS = 1_000


class Cause(enum.Enum):
    """What holds a watermark (the value is the metric label)."""

    NOTHING_LEFT = "nothing_left"
    WAITING = "waiting_for_predecessors"
    NO_READER = "no_reader"
    UNREAD_SEGMENT = "unread_segment"
    LEASE_LAPSED = "lease_lapsed"
    READER_BEHIND = "reader_behind"
    IDLE_TICK_DUE = "idle_tick_due"
    IDLE_TICKS_OFF = "idle_ticks_off"
    SILENT_WRITER = "silent_writer"
    WRITER_BEHIND = "writer_behind"
    NOT_KNOWN = "event_time_not_known"


#: Causes from the furthest from moving on its own to the nearest: which of tied segments to name.
_SEVERITY = (
    Cause.NO_READER,
    Cause.UNREAD_SEGMENT,
    Cause.LEASE_LAPSED,
    Cause.WAITING,
    Cause.READER_BEHIND,
    Cause.IDLE_TICKS_OFF,
    Cause.IDLE_TICK_DUE,
)


@dataclass(frozen=True)
class StoreTiming:
    """The store's timing that moves watermarks (its server's flags; the defaults are theirs).

    ``idle_tick_after_ms``: a segment with no write for longer gets an idle
    tick (``--idle-tick-after-ms``); ``polling_period_ms``: how often the
    store looks (None: idle ticks and writer timeouts are off);
    ``writer_idle_timeout_ms``: a writer silent this long is marked idle
    (0: never).
    """

    idle_tick_after_ms: int = 10_000
    polling_period_ms: int | None = 1_000
    writer_idle_timeout_ms: int = 60_000


@dataclass(frozen=True)
class Holder:
    """What holds one of a group's watermarks now.

    ``domain``: ``ingestion_time`` or ``event_time``; ``watermark``: the
    group's there (epoch ms); ``since``: when it stopped moving, as far as
    the store knows (the last write or tick, the oldest unread event's
    ingestion, the writer's last word); ``behind_next_ms``: how far it is
    behind the next segment's (None: no other segment); ``moves_in_ms``:
    when what will move it is due (None: not on a clock); ``text``: all of
    it for people.
    """

    domain: str
    cause: Cause
    segment: str | None
    watermark: int | None
    since: int | None
    behind_next_ms: int | None
    moves_in_ms: int | None
    text: str
    reader: str | None = None
    writer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (the cause by its label)."""
        return {**asdict(self), "cause": self.cause.value}


@dataclass(frozen=True)
class Stall:
    """What holds group ``group``'s watermarks at the store's time ``now``.

    ``event_time`` is None when no writer asserts event time on the group's
    segments (the ingestion watermark is then its event time too).
    """

    group: str
    now: int
    ingestion_time: Holder
    event_time: Holder | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values."""
        return {
            "group": self.group,
            "now": self.now,
            "ingestion_time": self.ingestion_time.to_dict(),
            "event_time": None if self.event_time is None else self.event_time.to_dict(),
        }

    @property
    def text(self) -> str:
        """Both holders for people, a line each."""
        lines = [f"group {self.group} at {utc_text(self.now)} (store clock)"]
        lines.append(f"  ingestion time: {self.ingestion_time.text}")
        if self.event_time is not None:
            lines.append(f"  event time: {self.event_time.text}")
        return "\n".join(lines)


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


def _ago(now: int, then: int) -> str:
    return f"{utc_text(then)} ({_seconds(max(0, now - then))} ago)"


def _behind_next(values: Mapping[str, int], holder: str) -> int | None:
    others = [v for s, v in values.items() if s != holder]
    return min(others) - values[holder] if others else None


def _held_by_host(
    host: str, seg: SegmentLag, tail_ahead_ms: int, now: int
) -> tuple[Cause, str, int | None, int | None] | None:
    """An engine's side (it holds no lease): behind, or at the tail (None)."""
    if seg.events:
        oldest = seg.processing_time_watermark + 1
        words = (
            f"{host} is behind on {seg.segment}: {seg.events} events unread, the oldest "
            f"ingested at {_ago(now, oldest)}"
        )
        return Cause.READER_BEHIND, words, oldest, None
    if tail_ahead_ms > 0:
        words = f"{host} has not read {seg.segment}'s latest watermark yet"
        return Cause.READER_BEHIND, words, None, None
    return None


def _held_by_readers(
    record: GroupRecord, seg: SegmentLag, tail_ahead_ms: int, now: int, host: str | None = None
) -> tuple[Cause, str, int | None, int | None] | None:
    """The readers' side: (cause, words, since, moves in ms); None: the reader is at the tail.

    ``tail_ahead_ms``: how far the segment's time at its tail is above the
    group's there (> 0: its reader has not read the rise yet). ``host``: the
    engine reading for a group that has no readers of its own.
    """
    s = seg.segment
    if seg.waiting_for:
        before = ", ".join(seg.waiting_for)
        return Cause.WAITING, f"{s} waits for {before} to be read to the end", None, None
    if host is not None:  # an engine reads for the group: no readers, no leases
        return _held_by_host(host, seg, tail_ahead_ms, now)
    if not record.leases:
        return Cause.NO_READER, f"no reader in the group: nobody reads {s}", None, None
    if seg.reader is None:
        return (
            Cause.UNREAD_SEGMENT,
            f"a segment nobody in the group reads: {s} (a reader's next sync takes it)",
            None,
            None,
        )
    lease = record.leases.get(seg.reader, 0)
    if lease <= now:
        return (
            Cause.LEASE_LAPSED,
            f"reader {seg.reader} holds {s} but its lease lapsed {_seconds(now - lease)} ago: "
            "another reader takes it at its next sync",
            lease,
            0,
        )
    if seg.events:
        oldest = seg.processing_time_watermark + 1
        return (
            Cause.READER_BEHIND,
            f"reader {seg.reader} is behind on {s}: {seg.events} events unread, the oldest "
            f"ingested at {_ago(now, oldest)}; if it is stuck its lease lapses in "
            f"{_seconds(lease - now)} and another reader takes {s}",
            oldest,
            lease - now,
        )
    if tail_ahead_ms > 0:
        return (
            Cause.READER_BEHIND,
            f"reader {seg.reader} has not read {s}'s latest watermark "
            f"({_seconds(tail_ahead_ms)} above the group's)",
            None,
            lease - now,
        )
    return None


def _held_by_segment(
    seg: SegmentLag, tail: SegmentTail | None, timing: StoreTiming, now: int
) -> tuple[Cause, str, int | None, int | None]:
    """The segment itself (its reader at its tail): an idle tick, or nothing, will move it."""
    s = seg.segment
    if tail is None:
        return Cause.IDLE_TICK_DUE, f"{s} itself: its tail is not known", None, None
    since = tail.last_write_time
    idle = f"{s} has had no write or tick since {_ago(now, since)}"
    period = timing.polling_period_ms
    if period is None:
        words = f"{idle}; idle ticks are off: only a write moves it"
        return Cause.IDLE_TICKS_OFF, words, since, None
    due = since + timing.idle_tick_after_ms + 1 - now
    if due < -2 * period:
        return (
            Cause.IDLE_TICKS_OFF,
            f"{idle}; its idle tick is {_seconds(-due)} overdue: idle ticks are off or "
            "failing (the server's idle_ticks task); only a write moves it",
            since,
            None,
        )
    return (
        Cause.IDLE_TICK_DUE,
        f"{idle}; an idle tick is due in {_seconds(max(0, due))}",
        since,
        max(0, due),
    )


def _ingestion_holder(
    record: GroupRecord,
    lag: GroupLag,
    tails: Mapping[str, SegmentTail],
    timing: StoreTiming,
    now: int,
    host: str | None,
) -> Holder:
    if not lag.segments:
        return Holder("ingestion_time", Cause.NOTHING_LEFT, None, None, None, None, None,
                      "nothing left to read")  # fmt: skip
    marks = {seg.segment: seg.watermark for seg in lag.segments}
    least = min(marks.values())

    def held(seg: SegmentLag) -> tuple[Cause, str, int | None, int | None]:
        tail = tails.get(seg.segment)
        ahead = 0 if tail is None else tail.watermark - seg.watermark
        return _held_by_readers(record, seg, ahead, now, host) or _held_by_segment(
            seg, tail, timing, now
        )

    # Of the segments at the minimum, the one furthest from moving (then the first by name).
    at_least = sorted((s for s in lag.segments if s.watermark == least), key=lambda x: x.segment)
    seg, (cause, words, since, moves_in) = min(
        ((s, held(s)) for s in at_least), key=lambda pair: _SEVERITY.index(pair[1][0])
    )
    behind = _behind_next(marks, seg.segment)
    return Holder(
        "ingestion_time", cause, seg.segment, seg.watermark, since, behind, moves_in,
        f"{_head(seg.watermark, seg.segment, behind)}: {words}", reader=seg.reader,
    )  # fmt: skip


def _writer_words(
    segment: str, writers: Sequence[WriterAssertion], timing: StoreTiming, now: int
) -> tuple[Cause, str, int | None, int | None, str | None]:
    if not writers:
        return (
            Cause.READER_BEHIND,
            f"no writer holds {segment} now: the group's readers have not read that yet",
            None, None, None,
        )  # fmt: skip
    writer = min(writers, key=lambda w: (w.event_time, w.writer_id))
    silent = now - writer.last_seen
    timeout = timing.writer_idle_timeout_ms
    if silent < _SILENT_AFTER_MS:
        return (
            Cause.WRITER_BEHIND,
            f"writer {writer.writer_id!r} asserts {utc_text(writer.event_time)}: its data is old; "
            "a later assertion of its moves it",
            writer.last_seen, None, writer.writer_id,
        )  # fmt: skip
    words = f"writer {writer.writer_id!r} silent for {_seconds(silent)}"
    if timeout <= 0 or timing.polling_period_ms is None:
        return (
            Cause.SILENT_WRITER,
            f"{words}; the store never marks writers idle: only its next assertion moves it",
            writer.last_seen, None, writer.writer_id,
        )  # fmt: skip
    moves_in = max(0, writer.last_seen + timeout - now)
    return (
        Cause.SILENT_WRITER,
        f"{words}, marked idle at {_seconds(timeout)} (in {_seconds(moves_in)})",
        writer.last_seen, moves_in, writer.writer_id,
    )  # fmt: skip


def event_time_segment(record: GroupRecord) -> str | None:
    """The segment at the group's event-time minimum (whose writers :func:`why` wants), if any."""
    known = _known_event_times(_event_times(record.state))
    return min(known, key=lambda s: (known[s], s)) if known else None


def _event_times(state: GroupState) -> dict[str, int | None]:
    times = {s: c.event_time for s, c in state.cursors.items()}
    times.update({s: w.event_time for s, w in state.waiting.items()})
    return times


def _known_event_times(times: Mapping[str, int | None]) -> dict[str, int]:
    return {s: t for s, t in times.items() if t is not None and t != NO_WRITER}


def _head(watermark: int, segment: str, behind: int | None) -> str:
    head = f"held at {utc_text(watermark)} by {segment}"
    return head if behind is None else f"{head}, {_seconds(behind)} behind the next segment"


def _event_time_holder(
    record: GroupRecord,
    lag: GroupLag,
    tails: Mapping[str, SegmentTail],
    writers: Mapping[str, Sequence[WriterAssertion]],
    timing: StoreTiming,
    now: int,
    host: str | None,
) -> Holder | None:
    state = record.state
    group = group_event_time(state)
    if group == NO_WRITER or (group is None and not writers_assert(state, tails)):
        return None
    times = _event_times(state)
    by_segment = {seg.segment: seg for seg in lag.segments}
    if group is None:
        segment = min(s for s, t in times.items() if t is None)
        return Holder(
            "event_time", Cause.NOT_KNOWN, segment, None, None, None, None,
            f"{segment}'s event time is not known until the group reads it",
            reader=by_segment[segment].reader if segment in by_segment else None,
        )  # fmt: skip
    known = _known_event_times(times)
    segment = event_time_segment(record)
    assert segment is not None  # the group's event time is one of them
    seg = by_segment[segment]
    tail = tails.get(segment)
    at_tail = None if tail is None else tail.event_time_watermark
    ahead = 0 if at_tail is None else at_tail - known[segment]
    found = _held_by_readers(record, seg, ahead, now, host)
    writer = None
    if found is None:
        cause, words, since, moves_in, writer = _writer_words(
            segment, writers.get(segment, ()), timing, now
        )
    else:
        cause, words, since, moves_in = found
    behind = _behind_next(known, segment)
    return Holder(
        "event_time", cause, segment, known[segment], since, behind, moves_in,
        f"{_head(known[segment], segment, behind)}: {words}", reader=seg.reader, writer=writer,
    )  # fmt: skip


def why(
    group: str,
    record: GroupRecord,
    lag: GroupLag,
    tails: Mapping[str, SegmentTail],
    writers: Mapping[str, Sequence[WriterAssertion]],
    timing: StoreTiming,
    now: int,
    host: str | None = None,
) -> Stall:
    """What holds group ``group``'s watermarks at the store's time ``now``.

    ``lag`` counts the group's unread events (:func:`connector.groups.lag.group_lag`);
    ``tails`` has the tails of its segments; ``writers`` the active writers
    of the segment at the event-time minimum (others are not looked at).
    ``host`` names the engine that reads for a group without readers of its
    own (a Spark query, a Flink job): it is then the reader.
    """
    return Stall(
        group,
        now,
        _ingestion_holder(record, lag, tails, timing, now, host),
        _event_time_holder(record, lag, tails, writers, timing, now, host),
    )
