"""The journal's records, one frozen value per kind of change.

Every change the store makes durable is one record: the sequencer writes it
to the journal, and applying it (live, or at recovery) changes the in-memory
state. On disk a record is a JSON object whose ``"op"`` names its kind and
whose keys are short (``"seg"``, ``"t"``, ``"w"``, ``"e"``, ...): that format
is kept exactly, so a data dir written by any earlier version still opens.
:func:`encode` and :func:`decode` are the only places that know it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connector.errors import FailedPreconditionError
from connector.store.event_time import WriterMark

__all__ = [
    "Committed",
    "KeyRange",
    "Record",
    "ScopeCreated",
    "ScopeDeleted",
    "SegmentSealing",
    "SegmentState",
    "StateDeleted",
    "StateSet",
    "StreamCreated",
    "StreamDeleted",
    "StreamScaled",
    "StreamSealed",
    "StreamState",
    "StreamTruncated",
    "SegmentTime",
    "StreamTicked",
    "Ticked",
    "changes_in",
    "WatermarkAsserted",
    "WritersTimedOut",
    "decode",
    "encode",
]


@dataclass(frozen=True)
class KeyRange:
    """A new segment: its number in the stream and its key range ``[low, high)``."""

    number: int
    low: float
    high: float


@dataclass(frozen=True)
class SegmentSealing:
    """A segment being sealed by a scale or a stream seal, at ``time_ms``."""

    number: int
    time_ms: int


@dataclass(frozen=True)
class SegmentTime:
    """A segment a change of event time reached, and that change's time on its clock."""

    number: int
    time_ms: int


@dataclass(frozen=True)
class ScopeCreated:
    """A scope was created."""

    scope: str


@dataclass(frozen=True)
class ScopeDeleted:
    """An empty scope was deleted."""

    scope: str


@dataclass(frozen=True)
class StreamCreated:
    """A stream was created at ``time_ms`` with the segments ``segments``."""

    scope: str
    stream: str
    time_ms: int
    segments: tuple[KeyRange, ...]


@dataclass(frozen=True)
class StreamScaled:
    """Segments sealed and their successors created, one epoch later, at ``time_ms``."""

    scope: str
    stream: str
    sealed: tuple[SegmentSealing, ...]
    created: tuple[KeyRange, ...]
    time_ms: int


@dataclass(frozen=True)
class StreamSealed:
    """A stream was sealed: its open segments with their seal times."""

    scope: str
    stream: str
    sealed: tuple[SegmentSealing, ...]


@dataclass(frozen=True)
class StreamDeleted:
    """A sealed stream was deleted with its segments."""

    scope: str
    stream: str


@dataclass(frozen=True)
class StreamTruncated:
    """A stream truncated at a cut.

    ``heads`` moves each cut segment's first readable offset; the ``removed``
    segments (sealed, wholly before the cut) lose their data.
    """

    scope: str
    stream: str
    heads: tuple[tuple[int, int], ...]
    removed: tuple[int, ...]


@dataclass(frozen=True)
class Committed:
    """An append: the segment's data up to ``end`` is ingested at ``time_ms``.

    ``last_event_number`` is the writer's last event in the batch;
    ``checkpoints`` are the sparse event boundaries inside it; ``events`` is
    how many events it stored (None in journals written before it was kept).
    """

    segment: str
    end: int
    time_ms: int
    writer_id: str
    last_event_number: int
    checkpoints: tuple[int, ...] = ()
    events: int | None = None


@dataclass(frozen=True)
class Ticked:
    """An idle tick: the segment's tail watermark moves to ``time_ms - 1``."""

    segment: str
    time_ms: int


@dataclass(frozen=True)
class StreamTicked:
    """Idle ticks of some of a stream's segments, one record for a round of them.

    Each segment's tail watermark moves to its ``time_ms - 1``. A round of
    ticks over thousands of idle segments is one journal entry per stream,
    not one per segment (:class:`Ticked`, which journals written before
    this record still hold).
    """

    scope: str
    stream: str
    segments: tuple[SegmentTime, ...]


@dataclass(frozen=True)
class WatermarkAsserted:
    """A writer's assertion (seed 002's W_SET) or idle mark (W_IDLE: ``event_time`` None).

    It reached the stream's open ``segments``, each at its own time (a
    temporal operation, like an idle tick), numbered ``number`` in the
    writer's sequence. ``fences`` are ``(segment number, last event number)``:
    numbers the writer discarded without learning their fate, up to which
    no late copy may be stored any more.
    """

    scope: str
    stream: str
    writer_id: str
    number: int
    event_time: int | None
    segments: tuple[SegmentTime, ...]
    fences: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class WritersTimedOut:
    """The store marked writers idle that were silent for its idle timeout, on ``segments``."""

    scope: str
    stream: str
    writer_ids: tuple[str, ...]
    segments: tuple[SegmentTime, ...]


@dataclass(frozen=True)
class StateSet:
    """A state value was stored under ``key`` at ``revision``."""

    key: str
    value: bytes
    revision: int


@dataclass(frozen=True)
class StateDeleted:
    """The value under ``key`` was deleted; ``revision`` was its last (the next set goes on).

    A value stored again under ``key`` takes ``revision + 1``, so a caller
    still holding a revision of the deleted value never matches the new one.
    """

    key: str
    revision: int


@dataclass(frozen=True)
class SegmentState:
    """A segment's whole durable state, as a compacted journal keeps it."""

    number: int
    key_low: float
    key_high: float
    epoch: int
    creation_time: int
    predecessors: tuple[str, ...]
    successors: tuple[str, ...]
    sealed: bool
    end: int
    last_write_time: int
    pending_time: int
    index_offsets: tuple[int, ...]
    index_watermarks: tuple[int, ...]
    index_counts: tuple[int, ...] | None
    checkpoints: tuple[int, ...]
    writer_numbers: Mapping[str, int]
    head: int = 0
    event_index_offsets: tuple[int, ...] = (-1,)
    event_index_times: tuple[int | None, ...] = (None,)
    writer_marks: Mapping[str, WriterMark] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamState:
    """A stream's whole durable state (compaction writes one per live stream)."""

    scope: str
    stream: str
    epoch: int
    sealed: bool
    segments: tuple[SegmentState, ...]


Record = (
    ScopeCreated
    | ScopeDeleted
    | StreamCreated
    | StreamScaled
    | StreamSealed
    | StreamDeleted
    | StreamTruncated
    | Committed
    | Ticked
    | StreamTicked
    | WatermarkAsserted
    | WritersTimedOut
    | StateSet
    | StateDeleted
    | StreamState
)


def encode(record: Record) -> dict[str, Any]:
    """The record as the journal stores it."""
    match record:
        case ScopeCreated(scope):
            return {"op": "scope", "scope": scope}
        case ScopeDeleted(scope):
            return {"op": "delete_scope", "scope": scope}
        case StreamCreated(scope, stream, time_ms, segments):
            ranges = [[r.number, r.low, r.high] for r in segments]
            encoded = {"op": "stream", "scope": scope, "stream": stream, "t": time_ms}
            encoded["segments"] = ranges
            return encoded
        case StreamScaled(scope, stream, sealed, created, time_ms):
            return {
                "op": "scale",
                "scope": scope,
                "stream": stream,
                "sealed": [[s.number, s.time_ms] for s in sealed],
                "created": [[r.number, r.low, r.high] for r in created],
                "t": time_ms,
            }
        case StreamSealed(scope, stream, sealed):
            sealings = [[s.number, s.time_ms] for s in sealed]
            return {"op": "seal_stream", "scope": scope, "stream": stream, "sealed": sealings}
        case StreamDeleted(scope, stream):
            return {"op": "delete_stream", "scope": scope, "stream": stream}
        case StreamTruncated(scope, stream, heads, removed):
            encoded = {"op": "truncate_stream", "scope": scope, "stream": stream}
            encoded["heads"] = [list(head) for head in heads]
            encoded["removed"] = list(removed)
            return encoded
        case Committed(segment, end, time_ms, writer_id, last, checkpoints, events):
            encoded = {"op": "commit", "seg": segment, "end": end, "t": time_ms, "w": writer_id}
            encoded["e"] = last
            if events is not None:
                encoded["n"] = events
            if checkpoints:
                encoded["b"] = list(checkpoints)
            return encoded
        case Ticked(segment, time_ms):
            return {"op": "tick", "seg": segment, "t": time_ms}
        case StreamTicked(scope, stream, segments):
            encoded = {"op": "ticks", "scope": scope, "stream": stream}
            encoded["segs"] = [[s.number, s.time_ms] for s in segments]
            return encoded
        case WatermarkAsserted(scope, stream, writer_id, number, event_time, segments, fences):
            encoded = {"op": "assert", "scope": scope, "stream": stream, "w": writer_id}
            encoded.update(k=number, et=event_time, segs=[[s.number, s.time_ms] for s in segments])
            if fences:
                encoded["f"] = [list(fence) for fence in fences]
            return encoded
        case WritersTimedOut(scope, stream, writer_ids, segments):
            encoded = {"op": "writers_idle", "scope": scope, "stream": stream}
            encoded.update(ws=list(writer_ids), segs=[[s.number, s.time_ms] for s in segments])
            return encoded
        case StateSet(key, value, revision):
            value_text = base64.b64encode(value).decode()
            return {"op": "state", "key": key, "rev": revision, "v": value_text}
        case StateDeleted(key, revision):
            return {"op": "delete_state", "key": key, "rev": revision}
        case StreamState(scope, stream, epoch, sealed, segments):
            return {
                "op": "stream_state",
                "scope": scope,
                "stream": stream,
                "epoch": epoch,
                "sealed": sealed,
                "segments": [_encode_segment(s) for s in segments],
            }
    msg = f"not a journal record: {record!r}"
    raise TypeError(msg)


def changes_in(encoded: Mapping[str, Any]) -> int:
    """How many segment changes a journal entry stands for: compaction's measure of history.

    A round of ticks counts the segments it ticked and a stream's state (in a
    snapshot) the segments it holds, so a journal is compacted after as many
    changes whether they were journaled one per entry or a round per entry.
    Any other entry counts one.
    """
    op = encoded.get("op")
    if op == "ticks":
        return max(1, len(encoded["segs"]))
    if op == "stream_state":
        return max(1, len(encoded["segments"]))
    return 1


def decode(encoded: Mapping[str, Any]) -> Record:
    """The record a journal entry holds.

    Raises:
        FailedPreconditionError: the entry is of an unknown kind.
    """
    op = encoded.get("op")
    if op == "scope":
        return ScopeCreated(encoded["scope"])
    if op == "delete_scope":
        return ScopeDeleted(encoded["scope"])
    if op == "stream":
        segments = tuple(KeyRange(*r) for r in encoded["segments"])
        return StreamCreated(encoded["scope"], encoded["stream"], encoded["t"], segments)
    if op == "scale":
        return StreamScaled(
            encoded["scope"],
            encoded["stream"],
            tuple(SegmentSealing(*s) for s in encoded["sealed"]),
            tuple(KeyRange(*r) for r in encoded["created"]),
            encoded["t"],
        )
    if op == "seal_stream":
        sealed = tuple(SegmentSealing(*s) for s in encoded["sealed"])
        return StreamSealed(encoded["scope"], encoded["stream"], sealed)
    if op == "delete_stream":
        return StreamDeleted(encoded["scope"], encoded["stream"])
    if op == "truncate_stream":
        heads = tuple((number, offset) for number, offset in encoded["heads"])
        return StreamTruncated(
            encoded["scope"], encoded["stream"], heads, tuple(encoded["removed"])
        )
    if op == "commit":
        return Committed(
            encoded["seg"],
            encoded["end"],
            encoded["t"],
            encoded["w"],
            encoded["e"],
            tuple(encoded.get("b", ())),
            encoded.get("n"),
        )
    if op == "tick":
        return Ticked(encoded["seg"], encoded["t"])
    if op == "ticks":
        stamps = tuple(SegmentTime(*s) for s in encoded["segs"])
        return StreamTicked(encoded["scope"], encoded["stream"], stamps)
    if op == "assert":
        return WatermarkAsserted(
            encoded["scope"],
            encoded["stream"],
            encoded["w"],
            encoded["k"],
            encoded["et"],
            tuple(SegmentTime(*s) for s in encoded["segs"]),
            tuple((number, last) for number, last in encoded.get("f", ())),
        )
    if op == "writers_idle":
        return WritersTimedOut(
            encoded["scope"],
            encoded["stream"],
            tuple(encoded["ws"]),
            tuple(SegmentTime(*s) for s in encoded["segs"]),
        )
    if op == "state":
        return StateSet(encoded["key"], base64.b64decode(encoded["v"]), encoded["rev"])
    if op == "delete_state":
        return StateDeleted(encoded["key"], encoded["rev"])
    if op == "stream_state":
        return StreamState(
            encoded["scope"],
            encoded["stream"],
            encoded["epoch"],
            encoded["sealed"],
            tuple(_decode_segment(s) for s in encoded["segments"]),
        )
    msg = f"unknown journal record {op!r}"
    raise FailedPreconditionError(msg)


def _encode_segment(state: SegmentState) -> dict[str, Any]:
    return {
        "n": state.number,
        "lo": state.key_low,
        "hi": state.key_high,
        "ep": state.epoch,
        "t": state.creation_time,
        "pred": list(state.predecessors),
        "succ": list(state.successors),
        "sealed": state.sealed,
        "end": state.end,
        "lw": state.last_write_time,
        "pt": state.pending_time,
        "idx": [list(state.index_offsets), list(state.index_watermarks)],
        "cnt": None if state.index_counts is None else list(state.index_counts),
        "b": list(state.checkpoints),
        "w": dict(state.writer_numbers),
        "head": state.head,
        "et": [list(state.event_index_offsets), list(state.event_index_times)],
        "wm": {
            writer_id: [m.event_time, m.number, m.active, m.since, m.last_seen]
            for writer_id, m in state.writer_marks.items()
        },
    }


def _decode_segment(encoded: Mapping[str, Any]) -> SegmentState:
    offsets, watermarks = encoded["idx"]
    counts = encoded.get("cnt")
    event_offsets, event_times = encoded.get("et", [[-1], [None]])
    return SegmentState(
        number=encoded["n"],
        key_low=encoded["lo"],
        key_high=encoded["hi"],
        epoch=encoded["ep"],
        creation_time=encoded["t"],
        predecessors=tuple(encoded["pred"]),
        successors=tuple(encoded["succ"]),
        sealed=encoded["sealed"],
        end=encoded["end"],
        last_write_time=encoded["lw"],
        pending_time=encoded["pt"],
        index_offsets=tuple(offsets),
        index_watermarks=tuple(watermarks),
        index_counts=None if counts is None else tuple(counts),
        checkpoints=tuple(encoded.get("b", ())),
        writer_numbers=dict(encoded["w"]),
        head=encoded.get("head", 0),
        # Journals written before writers asserted event time have neither: no writer, no index.
        event_index_offsets=tuple(event_offsets),
        event_index_times=tuple(event_times),
        writer_marks={w: WriterMark(*m) for w, m in encoded.get("wm", {}).items()},
    )
