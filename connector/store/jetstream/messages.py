"""The messages of a Tidemark stream in JetStream, and what their headers say.

A segment's subject holds three kinds of message, a stream's meta subject one:

- an **append** (``Tm-Op: a``): its payload is Tidemark's framing of the
  events (:mod:`connector.framing`), exactly the bytes the file store writes;
  its headers say where in the segment they start (``Tm-O``), how many events
  they hold (``Tm-N``), their ingestion time (``Tm-T``), the writer and its
  last event number (``Tm-W``, ``Tm-L``), the publish's token (``Tm-K``, so a
  server recognises its own publish after a lost acknowledgement) and the
  sparse event boundaries inside (``Tm-B``). An append too large for one
  message is several, published as one atomic batch;
- an **idle tick** (``Tm-Op: t``): its time;
- a **seal marker** (``Tm-Op: s``): the seal's time, the segment's end, its
  event count, every writer's last event number and the asserting writers'
  marks, so a segment whose appends a truncation purged still answers a
  retried append and a read at its end, and hands its successors the same
  marks;
- a **fence** (``Tm-Op: f``): nothing but its place, in the same atomic batch
  as a record of the stream that changes the segment (an assertion of event
  time, a writer's idle mark): its expected last sequence orders the change
  after every message its publisher saw;
- a **record** of the stream (``Tm-Op: m``, on the meta subject): one of
  :mod:`connector.store.records` (creation, scale, seal, truncation), in the
  journal's own JSON.

Everything a server needs to rebuild a segment is in the headers (the end of
an append is its start plus the payload's size), so servers follow a stream
with headers-only deliveries and fetch payloads only to serve reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, field

from connector.errors import FailedPreconditionError
from connector.store.event_time import WriterMark
from connector.store.records import Record, decode, encode

__all__ = [
    "Appended",
    "Entry",
    "FenceMarker",
    "MetaRecord",
    "SealMarker",
    "TickMessage",
    "append_headers",
    "decode_entry",
    "fence_headers",
    "meta_headers",
    "seal_headers",
    "tick_headers",
]

_OP = "Tm-Op"
_TIME = "Tm-T"
_OFFSET = "Tm-O"
_EVENTS = "Tm-N"
_WRITER = "Tm-W"
_LAST = "Tm-L"
_TOKEN = "Tm-K"
_BOUNDARIES = "Tm-B"
_WRITERS = "Tm-Writers"
_MARKS = "Tm-Marks"
_RECORD = "Tm-R"
#: What JetStream adds to a headers-only delivery: the size of the payload left out.
MSG_SIZE = "Nats-Msg-Size"


@dataclass(frozen=True)
class Appended:
    """One append message: events ``[start, end)`` of the segment, ingested at ``time_ms``."""

    time_ms: int
    start: int
    end: int
    events: int
    writer_id: str
    last_event_number: int
    token: str
    checkpoints: tuple[int, ...] = ()


@dataclass(frozen=True)
class TickMessage:
    """An idle tick at ``time_ms``."""

    time_ms: int


@dataclass(frozen=True)
class SealMarker:
    """The seal of a segment at ``time_ms``: its end, event count and writers' last numbers."""

    time_ms: int
    end: int
    events: int
    writers: Mapping[str, int] = field(default_factory=dict)
    marks: Mapping[str, WriterMark] = field(default_factory=dict)


@dataclass(frozen=True)
class FenceMarker:
    """A place in a segment's order taken by a record of the stream (see the module)."""


@dataclass(frozen=True)
class MetaRecord:
    """A record of the stream itself."""

    record: Record


Entry = Appended | TickMessage | SealMarker | FenceMarker | MetaRecord


def append_headers(
    time_ms: int,
    start: int,
    events: int,
    writer_id: str,
    last_event_number: int,
    token: str,
    checkpoints: Sequence[int] = (),
) -> dict[str, str]:
    """The headers of an append message."""
    headers = {
        _OP: "a",
        _TIME: str(time_ms),
        _OFFSET: str(start),
        _EVENTS: str(events),
        _WRITER: json.dumps(writer_id),
        _LAST: str(last_event_number),
        _TOKEN: token,
    }
    if checkpoints:
        headers[_BOUNDARIES] = " ".join(map(str, checkpoints))
    return headers


def tick_headers(time_ms: int) -> dict[str, str]:
    """The headers of an idle tick."""
    return {_OP: "t", _TIME: str(time_ms)}


def seal_headers(
    time_ms: int,
    end: int,
    events: int,
    writers: Mapping[str, int],
    marks: Mapping[str, WriterMark] | None = None,
) -> dict[str, str]:
    """The headers of a seal marker."""
    headers = {
        _OP: "s",
        _TIME: str(time_ms),
        _OFFSET: str(end),
        _EVENTS: str(events),
        _WRITERS: json.dumps(dict(writers), separators=(",", ":")),
    }
    if marks:
        encoded = {w: list(astuple(m)) for w, m in marks.items()}
        headers[_MARKS] = json.dumps(encoded, separators=(",", ":"))
    return headers


def fence_headers() -> dict[str, str]:
    """The headers of a fence."""
    return {_OP: "f"}


def meta_headers(record: Record) -> dict[str, str]:
    """The headers of a record on the meta subject."""
    return {_OP: "m", _RECORD: json.dumps(encode(record), separators=(",", ":"))}


def decode_entry(headers: Mapping[str, str], payload_size: int) -> Entry:
    """What a message says, from its headers and its payload's size.

    Raises:
        FailedPreconditionError: the headers are not a Tidemark message's.
    """
    try:
        op = headers[_OP]
        if op == "a":
            start = int(headers[_OFFSET])
            boundaries = headers.get(_BOUNDARIES)
            return Appended(
                time_ms=int(headers[_TIME]),
                start=start,
                end=start + payload_size,
                events=int(headers[_EVENTS]),
                writer_id=json.loads(headers[_WRITER]),
                last_event_number=int(headers[_LAST]),
                token=headers.get(_TOKEN, ""),
                checkpoints=tuple(map(int, boundaries.split())) if boundaries else (),
            )
        if op == "t":
            return TickMessage(int(headers[_TIME]))
        if op == "s":
            marks = json.loads(headers.get(_MARKS, "{}"))
            return SealMarker(
                time_ms=int(headers[_TIME]),
                end=int(headers[_OFFSET]),
                events=int(headers[_EVENTS]),
                writers=json.loads(headers.get(_WRITERS, "{}")),
                marks={w: WriterMark(*m) for w, m in marks.items()},
            )
        if op == "f":
            return FenceMarker()
        if op == "m":
            return MetaRecord(decode(json.loads(headers[_RECORD])))
    except (KeyError, ValueError, TypeError) as error:
        msg = f"a message with headers {dict(headers)!r} is not a Tidemark message: {error}"
        raise FailedPreconditionError(msg) from None
    msg = f"a message with headers {dict(headers)!r} is of no kind Tidemark knows"
    raise FailedPreconditionError(msg)
