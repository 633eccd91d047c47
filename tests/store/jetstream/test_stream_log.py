"""The fold of a stream's messages into its state, as plain values: no cluster needed.

Every server folds the same messages in the same order, so every server must
end with the same segments, offsets, watermark index and writer numbers,
however the messages reached it (its own publishes applied at once, others'
pushed, or pulled in a catch-up).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from connector.framing import iter_frames
from connector.store.jetstream.chunks import split_append
from connector.store.jetstream.log import StreamLog
from connector.store.jetstream.messages import (
    Appended,
    Entry,
    MetaRecord,
    SealMarker,
    TickMessage,
    append_headers,
    decode_entry,
    meta_headers,
    seal_headers,
    tick_headers,
)
from connector.store.jetstream.naming import meta_subject, segment_subject
from connector.store.jetstream.segment import JetStreamSegment
from connector.store.records import KeyRange, SegmentSealing, StreamScaled, StreamTruncated
from connector.store.streams import created_record

START = 1_700_000_000_000
NS, UID = "t", "u1"
META = meta_subject(NS, UID)


def _no_fetch(segment: JetStreamSegment, seqs: Sequence[int]) -> list[bytes]:
    message = "a fold never reads payloads"
    raise AssertionError(message)


def _new_log() -> StreamLog:
    return StreamLog("sc", "st", NS, UID, _no_fetch)


def _append(seq: int, start: int, size: int, time_ms: int, writer: str, last: int) -> Appended:
    return Appended(time_ms, start, start + size, 1, writer, last, f"token-{seq}")


def _history() -> list[tuple[int, str, Entry]]:
    """Creation, appends to two segments by two writers, a tick, a split with its seal marker."""
    seg0, seg1 = segment_subject(NS, UID, 0), segment_subject(NS, UID, 1)
    created = created_record("sc", "st", 2, START)
    scaled = StreamScaled(
        "sc",
        "st",
        (SegmentSealing(0, START + 40),),
        (KeyRange(2, 0.0, 0.25), KeyRange(3, 0.25, 0.5)),
        START + 41,
    )
    return [
        (1, META, MetaRecord(created)),
        (2, seg0, _append(2, 0, 20, START + 1, "a", 0)),
        (3, seg1, _append(3, 0, 30, START + 2, "b", 0)),
        (4, seg0, _append(4, 20, 20, START + 5, "b", 1)),
        (5, seg1, TickMessage(START + 15_000)),
        (6, META, MetaRecord(scaled)),
        (7, seg0, SealMarker(START + 40, 40, 2, {"a": 0, "b": 1})),
        (8, segment_subject(NS, UID, 2), _append(8, 0, 10, START + 42, "a", 1)),
    ]


def _state(log: StreamLog) -> dict[str, object]:
    return {
        s.name: (
            s.committed_end,
            s.sealed,
            s.successors,
            s.index_entries(),
            s.writer_numbers(),
            s.last_seq,
            s.directory(),
        )
        for s in log.segments()
    }


def test_a_log_folded_in_order_holds_the_segments_offsets_index_and_writers() -> None:
    log = _new_log()
    for seq, subject, entry in _history():
        log.apply_in_order(seq, subject, entry)

    assert [s.name for s in log.segments()] == ["sc/st/0", "sc/st/1", "sc/st/2", "sc/st/3"]
    zero = log.segment(0)
    assert (zero.committed_end, zero.sealed, zero.successors) == (40, True, ("sc/st/2", "sc/st/3"))
    assert zero.index_entries() == (
        [-1, 19, 39],
        [START - 1, START, START + 39],
        [0, 1, 2],
    )
    assert zero.writer_numbers() == {"a": 0, "b": 1}
    assert log.segment(1).info().watermark == START + 14_999  # the tick
    assert log.segment(2).creation_time == START + 41
    assert log.segment(2).index_entries()[1] == [START + 40, START + 41]
    assert (log.applied, log.meta_seq) == (8, 6)


def test_own_publishes_applied_early_leave_the_same_state_as_the_order_of_the_stream() -> None:
    history = _history()
    in_order = _new_log()
    for seq, subject, entry in history:
        in_order.apply_in_order(seq, subject, entry)
    early = _new_log()
    early.apply_in_order(*history[0])
    early.apply_published(*history[1])  # this server's own append, acknowledged first
    early.apply_published(*history[3])
    for seq, subject, entry in history:  # then the stream's order delivers everything again
        early.apply_in_order(seq, subject, entry)

    assert _state(early) == _state(in_order)


def test_a_time_that_does_not_rise_is_raised_so_watermarks_never_fall() -> None:
    log = _new_log()
    seg0 = segment_subject(NS, UID, 0)
    log.apply_in_order(1, META, MetaRecord(created_record("sc", "st", 1, START)))
    log.apply_in_order(2, seg0, _append(2, 0, 20, START + 100, "a", 0))
    log.apply_in_order(3, seg0, _append(3, 20, 20, START + 50, "a", 1))  # a clock that fell
    log.apply_in_order(4, seg0, TickMessage(START + 10))

    offsets, watermarks, _ = log.segment(0).index_entries()
    assert offsets == [-1, 19, 39]
    assert watermarks == [START - 1, START + 99, START + 101]
    assert log.segment(0).last_write_time == START + 102


def test_a_log_that_sees_only_a_purged_segments_seal_marker_agrees_after_the_truncation() -> None:
    """A server that starts after a truncation purged a segment sees its seal marker only."""
    history = _history()
    truncated = StreamTruncated("sc", "st", ((2, 0), (3, 0)), (0,))
    history.append((9, META, MetaRecord(truncated)))
    saw_all = _new_log()
    for seq, subject, entry in history:
        saw_all.apply_in_order(seq, subject, entry)
    purged = {2, 4}  # segment 0's appends; its seal marker stays
    came_later = _new_log()
    for seq, subject, entry in history:
        if seq not in purged:
            came_later.apply_in_order(seq, subject, entry)

    assert _state(came_later) == _state(saw_all)
    zero = came_later.segment(0)
    assert (zero.head, zero.committed_end, zero.writer_numbers()) == (40, 40, {"a": 0, "b": 1})
    assert zero.watermark_after(40) == START + 39


def test_messages_say_what_their_headers_carry() -> None:
    appended = Appended(START, 100, 160, 3, 'writer "x"\n', 7, "tok", (120,))
    headers = append_headers(START, 100, 3, 'writer "x"\n', 7, "tok", (120,))
    assert decode_entry(headers, 60) == appended
    assert decode_entry(tick_headers(START + 1), 0) == TickMessage(START + 1)
    marker = SealMarker(START + 2, 160, 3, {"w": 7})
    assert decode_entry(seal_headers(START + 2, 160, 3, {"w": 7}), 0) == marker
    record = created_record("sc", "st", 3, START)
    assert decode_entry(meta_headers(record), 0) == MetaRecord(record)


@pytest.mark.parametrize("room", [10_000, 1_000, 200])
def test_an_append_is_split_at_event_boundaries_into_messages_that_fit(room: int) -> None:
    events = [bytes([i]) * (50 + i) for i in range(40)]
    keys = [f"key-{i % 3}" for i in range(40)]
    messages = split_append(events, keys, room, 7, 1_000, START, "w", "tok")

    assert all(len(frames) <= room for frames, _ in messages)
    assert [m.start for _, m in messages] == [1_000] + [m.end for _, m in messages[:-1]]
    assert [m.time_ms for _, m in messages] == [START + i for i in range(len(messages))]
    assert sum(m.events for _, m in messages) == 40
    assert messages[-1][1].last_event_number == 7 + 39
    decoded = [
        (f.routing_key, f.payload, f.ingestion_time)
        for frames, m in messages
        for f in iter_frames(frames, m.start)
    ]
    times = [m.time_ms for _, m in messages for _ in range(m.events)]
    assert decoded == list(zip(keys, events, times, strict=True))
    if room == 200:
        assert len(messages) > 10
