"""Writers' event time in the store (seed 002), through a real gRPC server on a synthetic clock.

Per segment the store keeps, beside the ingestion watermark index, the
writers' marks and an event-time index: at each position, the least latest
assertion of the writers active there (None when none is). It travels in
reads (zero-length tail reads too), read plans and segment infos, survives
restarts and compaction, and passes to successors at a split or merge.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

from connector.client import EventWriter, JsonSerializer, StoreClient, StreamManager, WriterConfig
from connector.clock import ManualClock
from connector.errors import FailedPreconditionError, InvalidArgumentError
from connector.model import Assertion
from connector.server import StoreServer
from connector.store import front
from tests.conftest import segment_inside

from . import read_frames

#: Every storage keeps the writers' event time by the same rules.
pytestmark = pytest.mark.storages("file", "jetstream")


def _stream(client: StoreClient, stream: str = "st", segments: int = 1) -> list[str]:
    manager = StreamManager(client)
    manager.create_scope("sc", exist_ok=True)
    return [s.segment for s in manager.create_stream("sc", stream, segments).segments]


def event_times(client: StoreClient, segment: str) -> list[tuple[int, int | None]]:
    """``(offset, event-time watermark after it)`` at each event boundary of ``segment``."""
    end = client.segment_info(segment).write_offset
    offset = 0
    seen = []
    while offset < end:
        result = client.read(segment, offset, max_bytes=1)  # one whole event
        seen.append((result.next_offset, result.event_time_watermark))
        offset = result.next_offset
    return seen


def _counted_calls(client: StoreClient, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the client's appends and assertions from now on, in order (a live list)."""
    calls: list[str] = []
    for name in ("append", "assert_watermark"):
        method = getattr(client, name)

        def counted(*args: object, _method=method, _name=name, **kwargs: object) -> object:
            calls.append(_name)
            return _method(*args, **kwargs)

        monkeypatch.setattr(client, name, counted)
    return calls


def _index(server: StoreServer, segment: str) -> tuple[list[int], list[int | None]]:
    return segment_inside(server, segment).event_index_entries()


def test_the_watermark_at_each_position_is_the_least_assertion_of_the_writers_active_there(
    store_client: StoreClient, clock: ManualClock
) -> None:
    (segment,) = _stream(store_client)
    c = store_client
    c.append(segment, "a", 0, [b"a0"])  # before anyone asserted: no watermark
    assert c.assert_watermark("sc", "st", "a", 0, 1_000).stored
    c.append(segment, "a", 1, [b"a1"])
    assert c.assert_watermark("sc", "st", "b", 0, 400).stored  # b joins below a
    c.append(segment, "b", 0, [b"b0"])
    c.assert_watermark("sc", "st", "a", 1, 1_500)
    c.assert_watermark("sc", "st", "b", 1, 2_000)  # a is now the least
    c.append(segment, "a", 2, [b"a2"])
    c.assert_watermark("sc", "st", "a", 2, None)  # a idles: b alone
    c.append(segment, "b", 1, [b"b1"])
    c.assert_watermark("sc", "st", "b", 2, None)  # nobody
    c.append(segment, "b", 2, [b"b2"])

    # The watermark after each event: what holds from the next one on.
    assert [w for _, w in event_times(c, segment)] == [1_000, 400, 1_500, 2_000, None, None]
    info = c.segment_info(segment)
    assert info.event_time_watermark is None and info.writers == ()


def test_a_read_carries_the_least_event_time_in_force_at_its_events(
    store_client: StoreClient, clock: ManualClock
) -> None:
    (segment,) = _stream(store_client)
    c = store_client
    c.append(segment, "a", 0, [b"a0"])  # in force at a0: nobody
    c.assert_watermark("sc", "st", "a", 0, 1_000)
    c.append(segment, "a", 1, [b"a1"])  # 1000
    c.append(segment, "a", 2, [b"a2"])  # 1000
    c.assert_watermark("sc", "st", "b", 0, 400)  # b joins below a
    c.append(segment, "b", 0, [b"b0"])  # 400
    c.assert_watermark("sc", "st", "a", 1, 1_500)
    c.assert_watermark("sc", "st", "b", 1, 2_000)
    c.append(segment, "a", 3, [b"a3"])  # 1500
    starts = [0] + [end for end, _ in event_times(c, segment)]

    def floor(first: int, stop: int) -> int | None:
        """The floor of a read of the events numbered ``first`` up to ``stop`` (excluded)."""
        result = c.read(segment, starts[first], max_bytes=starts[stop] - starts[first])
        assert result.next_offset == starts[stop]
        return result.event_time_floor

    assert floor(0, 1) is None  # nobody held it at a0
    assert floor(0, 2) == 1_000
    assert floor(1, 3) == 1_000
    assert floor(0, 5) == floor(1, 4) == floor(3, 4) == 400  # b joined below a before b0
    assert floor(4, 5) == 1_500
    assert floor(3, 5) == 400
    tail = c.read(segment, starts[5])
    assert tail.event_time_floor == tail.event_time_watermark == 1_500


def test_a_zero_length_tail_read_carries_the_event_time_and_a_waiting_read_wakes_on_an_assertion(
    store_client: StoreClient, clock: ManualClock
) -> None:
    (segment,) = _stream(store_client)
    store_client.append(segment, "a", 0, [b"x"])
    tail = store_client.segment_info(segment).write_offset
    assert store_client.read(segment, tail).event_time_watermark is None
    store_client.assert_watermark("sc", "st", "a", 0, 5_000)
    empty = store_client.read(segment, tail)
    assert (empty.data, empty.event_time_watermark) == (b"", 5_000)

    with StoreClient(store_client.uri) as other:
        asserted = []

        def assert_soon() -> None:
            time.sleep(0.2)
            clock.advance(1)
            asserted.append(other.assert_watermark("sc", "st", "a", 1, 6_000))

        thread = threading.Thread(target=assert_soon)
        thread.start()
        began = time.monotonic()
        woken = store_client.read(segment, tail, wait_ms=10_000, known_watermark=empty.watermark)
        waited = time.monotonic() - began
        thread.join()
    assert woken.event_time_watermark == 6_000 and woken.data == b""
    assert waited < 5, f"the read waited {waited:.1f} s for an assertion made after 0.2 s"


def test_an_assertion_is_a_temporal_operation_on_every_open_segment(
    store_client: StoreClient, clock: ManualClock
) -> None:
    segments = _stream(store_client, segments=3)
    clock.advance(100)
    result = store_client.assert_watermark("sc", "st", "w", 0, 10)
    assert result.segments == tuple(segments)
    for segment in segments:
        info = store_client.segment_info(segment)
        assert info.last_write_time == clock.now_ms()
        assert info.watermark == clock.now_ms() - 1
        assert info.event_time_watermark == 10
        assert [(w.writer_id, w.event_time) for w in info.writers] == [("w", 10)]


def test_a_retried_assertion_is_stored_once_and_a_late_copy_changes_nothing(
    store_server: StoreServer, store_client: StoreClient, clock: ManualClock
) -> None:
    (segment,) = _stream(store_client)
    journal = store_server.store.journal_size
    assert store_client.assert_watermark("sc", "st", "w", 0, 100).stored
    before = journal()
    again = store_client.assert_watermark("sc", "st", "w", 0, 100)
    assert not again.stored and journal() == before
    assert store_client.assert_watermark("sc", "st", "w", 1, 200).stored
    late = store_client.assert_watermark("sc", "st", "w", 0, 100)  # a late copy of number 0
    assert not late.stored
    assert store_client.segment_info(segment).event_time_watermark == 200


def test_an_assertion_riding_on_an_append_follows_its_events_and_is_refused_with_them(
    store_client: StoreClient, clock: ManualClock
) -> None:
    first, second = _stream(store_client, segments=2)
    c = store_client
    result = c.append(first, "a", 0, [b"a0", b"a1"], assertion=Assertion(0, 500))
    assert (result.appended, result.assertion.stored) == (2, True)
    assert sorted(result.assertion.segments) == [first, second]
    assert [w for _, w in event_times(c, first)] == [None, 500]  # after both events
    for segment in (first, second):  # on every open segment, as alone
        assert [(w.writer_id, w.event_time) for w in c.segment_info(segment).writers] == [
            ("a", 500)
        ]
    state = [(c.segment_info(s), event_times(c, s)) for s in (first, second)]
    again = c.append(first, "a", 0, [b"a0", b"a1"], assertion=Assertion(0, 500))  # a retry
    assert (again.appended, again.duplicates, again.assertion.stored) == (0, 2, False)
    assert [(c.segment_info(s), event_times(c, s)) for s in (first, second)] == state

    with pytest.raises(InvalidArgumentError, match=r"500.*400|400.*500"):
        c.append(first, "a", 2, [b"a2"], assertion=Assertion(1, 400))
    assert [(c.segment_info(s), event_times(c, s)) for s in (first, second)] == state
    # An append refused for its own reasons (a gap in the writer's numbers) stores no assertion.
    with pytest.raises(FailedPreconditionError, match="expected is 2"):
        c.append(first, "a", 7, [b"a7"], assertion=Assertion(1, 600))
    assert [(c.segment_info(s), event_times(c, s)) for s in (first, second)] == state
    stored = c.append(first, "a", 2, [b"a2"], assertion=Assertion(2, None))  # number 2 unused
    assert (stored.appended, stored.assertion.stored) == (1, True)
    assert c.segment_info(first).event_time_watermark is None  # a idles: nobody holds it
    c.seal_stream("sc", "st")
    sealed = c.segment_info(first).write_offset
    with pytest.raises(FailedPreconditionError, match="sealed"):
        c.append(first, "a", 3, [b"a3"], assertion=Assertion(3, 600))
    assert c.segment_info(first).write_offset == sealed


def test_a_joining_assertion_comes_before_its_events_and_a_retry_joins_once(
    store_server: StoreServer, store_client: StoreClient, clock: ManualClock
) -> None:
    first, second = _stream(store_client, segments=2)
    c = store_client
    c.assert_watermark("sc", "st", "other", 0, 5_000)  # another writer holds the stream
    c.append(first, "other", 0, [b"o0"])
    start = c.segment_info(first).write_offset
    clock.advance(10)
    result = c.append(
        first, "w", 0, [b"w0", b"w1"], joining=Assertion(0, 1_000), assertion=Assertion(1, 2_000)
    )
    assert (result.appended, result.joining.stored, result.assertion.stored) == (2, True, True)
    assert sorted(result.joining.segments) == [first, second]
    # At the writer's events the watermark is its joining time: it joined before them.
    read = c.read(first, start)
    assert (read.event_time_floor, read.event_time_watermark) == (1_000, 2_000)
    assert [w for _, w in event_times(c, first)] == [1_000, 1_000, 2_000]
    assert c.segment_info(second).event_time_watermark == 2_000
    # A temporal operation of its own: stamped on the segment's clock before the batch.
    offsets, watermarks, _ = segment_inside(store_server, first).index_entries()
    assert watermarks[offsets.index(start - 1)] + 1 < result.ingestion_time

    def state() -> list[object]:
        return [(c.segment_info(s), event_times(c, s)) for s in (first, second)]

    before = state()
    again = c.append(
        first, "w", 0, [b"w0", b"w1"], joining=Assertion(0, 1_000), assertion=Assertion(1, 2_000)
    )
    assert (again.duplicates, again.joining.stored, again.assertion.stored) == (2, False, False)
    assert state() == before
    refused = [
        (InvalidArgumentError, "2000", Assertion(2, 1_500), None),  # below its previous one
        (InvalidArgumentError, "idle mark", Assertion(2, None), None),
        (InvalidArgumentError, "numbered after", Assertion(3, 2_500), Assertion(2, 3_000)),
        (InvalidArgumentError, "step back", Assertion(2, 2_500), Assertion(3, 2_400)),
    ]
    for error, match, joining, after in refused:
        with pytest.raises(error, match=match):
            c.append(first, "w", 2, [b"w2"], joining=joining, assertion=after)
    # An append refused for its own reasons (a gap in the writer's numbers) joins nothing.
    with pytest.raises(FailedPreconditionError, match="expected is 2"):
        c.append(first, "w", 7, [b"w7"], joining=Assertion(2, 2_500))
    assert state() == before


def test_successors_start_with_the_writers_their_predecessors_had_at_the_seal(
    store_client: StoreClient, clock: ManualClock
) -> None:
    _stream(store_client, segments=2)
    c = store_client
    c.assert_watermark("sc", "st", "a", 0, 300)
    c.assert_watermark("sc", "st", "b", 0, 700)
    c.scale_stream("sc", "st", [0], 2)  # 0 -> 2, 3
    for name in ("sc/st/2", "sc/st/3"):
        info = c.segment_info(name)
        assert info.event_time_watermark == 300
        assert {w.writer_id for w in info.writers} == {"a", "b"}
        assert c.read(name, 0).event_time_watermark == 300
    c.assert_watermark("sc", "st", "a", 1, None)  # a idles on 1, 2 and 3
    c.scale_stream("sc", "st", [3, 1], 0)  # merge 3 and 1 -> 4
    merged = c.segment_info("sc/st/4")
    assert merged.event_time_watermark == 700
    assert [w.writer_id for w in merged.writers] == ["b"]
    assert c.assert_watermark("sc", "st", "a", 2, 900).segments == ("sc/st/2", "sc/st/4")


def test_writers_silent_past_the_idle_timeout_stop_holding_the_watermark_back(
    start_store: Callable[..., StoreServer], clock: ManualClock
) -> None:
    server = start_store(writer_idle_timeout_ms=60_000)
    with StoreClient(server.uri) as c:
        (segment,) = _stream(c)
        c.assert_watermark("sc", "st", "slow", 0, 100)
        c.assert_watermark("sc", "st", "busy", 0, 500)
        clock.advance(40_000)
        c.append(segment, "busy", 0, [b"b"])  # an append counts as being seen
        clock.advance(20_010)  # the slow writer was seen 60,010 ms ago, minus the ms of stamps
        assert server.store.mark_silent_writers_idle() == 1
        info = c.segment_info(segment)
        assert info.event_time_watermark == 500
        assert [w.writer_id for w in info.writers] == ["busy"]
        assert server.store.mark_silent_writers_idle() == 0
        clock.advance(40_010)
        assert server.store.mark_silent_writers_idle() == 1
        assert c.segment_info(segment).event_time_watermark is None
        # The slow writer comes back: it joins again with its next assertion.
        c.assert_watermark("sc", "st", "slow", 1, 150)
        assert c.segment_info(segment).event_time_watermark == 150
        # A retry of an assertion made before the timeout does not bring a writer back.
        clock.advance(60_010)
        assert server.store.mark_silent_writers_idle() == 1
        assert not c.assert_watermark("sc", "st", "slow", 1, 150).stored
        assert c.segment_info(segment).event_time_watermark is None


def test_the_timeout_scan_decides_only_about_streams_where_a_writer_asserted(
    start_store: Callable[..., StoreServer], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Thousands of streams nobody asserted event time on cost the scan a look each, not a
    # decision (a copy of the stream and its staging, every polling period).
    decided: list[str] = []
    real = front.timeout_record

    def counted(entry, now_ms, timeout_ms):  # noqa: ANN001, ANN202
        decided.append(entry.stream)
        return real(entry, now_ms, timeout_ms)

    monkeypatch.setattr(front, "timeout_record", counted)
    server = start_store(writer_idle_timeout_ms=60_000)
    with StoreClient(server.uri) as c:
        _stream(c, "asserted")
        for number in range(3):
            _stream(c, f"quiet{number}", segments=2)
        c.assert_watermark("sc", "asserted", "w", 0, 100)
        clock.advance(60_010)
        assert server.store.mark_silent_writers_idle() == 1
        assert server.store.mark_silent_writers_idle() == 0  # idle now: nothing to decide
    assert decided == ["asserted"]


def test_a_timeout_of_zero_never_marks_a_writer_idle(
    start_store: Callable[..., StoreServer], clock: ManualClock
) -> None:
    server = start_store(writer_idle_timeout_ms=0)
    with StoreClient(server.uri) as c:
        _stream(c)
        c.assert_watermark("sc", "st", "w", 0, 100)
        clock.advance(10**9)
        assert server.store.mark_silent_writers_idle() == 0
        assert c.segment_info("sc/st/0").event_time_watermark == 100


def test_the_store_marks_silent_writers_idle_by_itself_every_polling_period(
    start_store: Callable[..., StoreServer], clock: ManualClock, wait_until: Callable[..., object]
) -> None:
    server = start_store(writer_idle_timeout_ms=1_000, polling_period_ms=20)
    with StoreClient(server.uri) as c:
        _stream(c)
        c.assert_watermark("sc", "st", "w", 0, 100)
        names = {t.name for t in server.store.background_status()}
        assert "writer_idle_timeouts" in names
        clock.advance(1_010)
        wait_until(
            lambda: c.segment_info("sc/st/0").event_time_watermark is None,
            timeout=10,
            what="the background task to mark the silent writer idle",
        )


def test_the_index_and_the_writers_survive_a_restart_and_compaction(
    start_store: Callable[..., StoreServer], clock: ManualClock, storage: str
) -> None:
    server = start_store(compact_after_records=5)
    with StoreClient(server.uri) as c:
        _stream(c, segments=2)
        for n in range(12):
            clock.advance(3)
            if n % 2:  # riding on the append, or alone after it
                c.append("sc/st/0", "a", n, [f"a{n}".encode()], assertion=Assertion(n, 100 * n))
            else:
                c.append("sc/st/0", "a", n, [f"a{n}".encode()])
                c.assert_watermark("sc", "st", "a", n, 100 * n)
            c.assert_watermark("sc", "st", "b", n, 100 * n + 50 if n % 3 else None)
        c.scale_stream("sc", "st", [1], 2)
        before = {s: event_times(c, s) for s in ("sc/st/0", "sc/st/1", "sc/st/2", "sc/st/3")}
        infos = {s: c.segment_info(s) for s in before}
        indexes = {s: _index(server, s) for s in before}
    server.stop()
    if storage == "file":
        assert server.store.journal_size() < 20_000  # compacted along the way
    again = start_store(compact_after_records=5)
    with StoreClient(again.uri) as c:
        assert {s: event_times(c, s) for s in before} == before
        assert {s: c.segment_info(s) for s in before} == infos
        assert {s: _index(again, s) for s in before} == indexes
        # The writers' numbers came back too: a retry is still a duplicate, a fall still refused.
        assert not c.assert_watermark("sc", "st", "a", 11, 1_100).stored
        retried = c.append("sc/st/0", "a", 11, [b"a11"], assertion=Assertion(11, 1_100))
        assert (retried.duplicates, retried.assertion.stored) == (1, False)
        with pytest.raises(InvalidArgumentError, match="1100"):
            c.assert_watermark("sc", "st", "a", 12, 1_000)
        with pytest.raises(InvalidArgumentError, match="1100"):
            c.append("sc/st/0", "a", 12, [b"a12"], assertion=Assertion(12, 1_000))
        assert {s: event_times(c, s) for s in before} == before


def test_event_writer_asserts_after_its_events_marks_idle_and_idles_when_closed(
    store_client: StoreClient, clock: ManualClock
) -> None:
    (segment,) = _stream(store_client)
    writer = EventWriter(store_client, "sc/st", JsonSerializer(), writer_id="sensor")
    writer.write_event({"ts": 10})
    writer.write_event({"ts": 20})
    assert writer.note_time(20).stored  # flushes first: the assertion follows both events
    times = event_times(store_client, segment)
    assert [w for _, w in times] == [None, 20]
    assert store_client.segment_info(segment).event_time_watermark == 20
    writer.write_event({"ts": 30})
    writer.mark_idle()
    assert store_client.segment_info(segment).event_time_watermark is None
    with pytest.raises(InvalidArgumentError, match="20"):
        writer.note_time(19)
    writer.note_time(25)
    writer.close()
    assert store_client.segment_info(segment).event_time_watermark is None
    writer.close()  # twice is harmless


def test_event_writer_assertions_ride_on_its_last_append_and_go_alone_without_events(
    store_client: StoreClient, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    segments = _stream(store_client, segments=2)
    calls = _counted_calls(store_client, monkeypatch)
    writer = EventWriter(store_client, "sc/st", JsonSerializer(), writer_id="w")
    for k in range(8):  # events for both segments
        writer.write_event({"ts": 10}, routing_key=str(k))
    assert writer.note_time(10).stored
    assert calls == ["append", "append"]  # the assertion rode on the second
    for segment in segments:
        assert store_client.segment_info(segment).event_time_watermark == 10
        assert [w for _, w in event_times(store_client, segment)][-1] == 10
    calls.clear()
    assert writer.note_time(20).stored
    assert calls == ["assert_watermark"]  # nothing queued: alone
    calls.clear()
    writer.write_event({"ts": 30}, routing_key="0")
    writer.close()  # the idle mark rides on the last append
    assert calls == ["append"]
    assert all(store_client.segment_info(s).event_time_watermark is None for s in segments)


def test_event_writer_asserts_from_a_timestamp_assigner_with_an_out_of_orderness_bound(
    store_client: StoreClient, clock: ManualClock
) -> None:
    (segment,) = _stream(store_client)
    config = WriterConfig(assert_watermarks_from="ts", max_out_of_orderness=100)
    with EventWriter(store_client, "sc/st", JsonSerializer(), config=config) as writer:
        writer.write_event({"ts": 1_000})
        writer.write_event({"ts": 900})
        writer.flush()
        assert store_client.segment_info(segment).event_time_watermark == 899
        writer.flush()  # nothing new: nothing asserted again
        writer.write_event({"ts": 950})  # within the bound: not late
        writer.write_event({"ts": 850})  # below what it asserted: stored, counted late
        writer.flush()
        assert writer.late_events == 1
        assert store_client.segment_info(segment).event_time_watermark == 899
        writer.write_event({"ts": 2_000})
        writer.flush()
        assert store_client.segment_info(segment).event_time_watermark == 1_899
    assert store_client.segment_info(segment).event_time_watermark is None  # closed: idle
    assert len(event_times(store_client, segment)) == 5


def test_an_asserting_writer_joins_before_its_first_events_in_the_call_that_carries_them(
    store_client: StoreClient, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    segments = _stream(store_client, segments=2)
    c = store_client
    calls = _counted_calls(c, monkeypatch)
    config = WriterConfig(assert_watermarks_from="ts", max_out_of_orderness=100)
    writer = EventWriter(c, "sc/st", JsonSerializer(), writer_id="w", config=config)
    for k, ts in enumerate((1_000, 800, 950, 1_000)):  # events for both segments
        writer.write_event({"ts": ts}, routing_key=str(k))
    writer.flush()
    assert calls == ["append", "append"]  # the join rode on the first, the assertion on the last
    for segment in segments:  # the join came before every event: 800 - 100 - 1
        assert c.read(segment, 0).event_time_floor == 699
        assert [w for _, w in event_times(c, segment)][-1] == 899
    calls.clear()
    writer.write_event({"ts": 2_000}, routing_key="0")
    writer.flush()
    assert calls == ["append"]  # holding the watermark: nothing to join
    writer.mark_idle()
    ends = {s: c.segment_info(s).write_offset for s in segments}
    calls.clear()
    writer.write_event({"ts": 3_000}, routing_key="0")
    writer.flush()  # idle: it joins again before its event, in the call that carries it
    assert calls == ["append"]
    (segment,) = [s for s in segments if c.segment_info(s).write_offset > ends[s]]
    assert c.read(segment, ends[segment]).event_time_floor == 2_899
    writer.close()


def test_a_writer_on_a_sealed_stream_cannot_assert(
    store_client: StoreClient, clock: ManualClock
) -> None:
    _stream(store_client)
    writer = EventWriter(store_client, "sc/st", JsonSerializer())
    store_client.seal_stream("sc", "st")
    with pytest.raises(FailedPreconditionError, match="sealed"):
        writer.note_time(5)


def test_a_new_incarnation_of_a_writer_id_continues_it_instead_of_replaying_it(
    store_client: StoreClient, clock: ManualClock
) -> None:
    (segment,) = _stream(store_client)
    first = EventWriter(store_client, "sc/st", JsonSerializer(), writer_id="subtask-0")
    for n in range(3):
        first.write_event({"n": n})
    first.note_time(100)
    # A restart: the same id, numbered from above anything the first one used.
    second = EventWriter(
        store_client, "sc/st", JsonSerializer(), writer_id="subtask-0", numbers_from=1_000
    )
    second.write_event({"n": 0})  # the same payload again: stored, not skipped as a replay
    second.note_time(150)
    assert [json.loads(f.payload)["n"] for f in read_frames(store_client, segment)] == [0, 1, 2, 0]
    assert store_client.segment_info(segment).event_time_watermark == 150
    # A late copy of the first incarnation's batch is a duplicate now.
    late = store_client.append(segment, "subtask-0", 3, [b'{"n": 3}'])
    assert (late.appended, late.duplicates) == (0, 1)
    with pytest.raises(InvalidArgumentError, match="150"):
        second.note_time(120)
