"""A segment's work from a position (for percentile watermarks), through a real server.

Checked against the truth the segment's own watermark index and events
give: every unread event by the segment's watermark just before it, and
every writer active at a position by its assertion there.
"""

from __future__ import annotations

from bisect import bisect_left

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.client import EventWriter, JsonSerializer, StoreClient
from connector.errors import InvalidArgumentError
from connector.groups.percentile import percentile_time
from connector.model import PlanRequest, TimeCount
from tests.conftest import new_stream_in, segment_inside

from . import read_frames

_step = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5)),
    st.tuples(st.just("wait"), st.integers(1, 3_000)),
    st.tuples(st.just("tick"), st.just(0)),
)


def _segment(client: StoreClient) -> str:
    return f"{new_stream_in(client)}/0"


def _work(client: StoreClient, segment: str, offset: int, buckets: int):
    (planned,) = client.plan_reads([PlanRequest(segment, offset, 1, None, None, buckets)])
    assert not isinstance(planned, Exception), planned
    return planned.work


def _expanded(counted) -> list[int]:
    return sorted(t for b in counted for t in [b.time] * b.count)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(_step, min_size=1, max_size=25), data=st.data())
def test_unread_events_are_told_exactly_and_in_few_buckets_never_above(
    store_server, store_client, clock, history, data
) -> None:
    segment = _segment(store_client)
    writer = EventWriter(store_client, segment.rsplit("/", 1)[0], JsonSerializer())
    for kind, amount in history:
        if kind == "append":
            for i in range(amount):
                writer.write_event({"i": i})
            writer.flush()
        elif kind == "wait":
            clock.advance(amount)
        else:
            store_server.store.advance_idle_segments()
    offsets, watermarks, _ = segment_inside(store_server, segment).index_entries()
    starts = [f.offset for f in read_frames(store_client, segment)]
    position = data.draw(
        st.sampled_from([*starts, store_client.segment_info(segment).write_offset])
    )
    truth = sorted(watermarks[bisect_left(offsets, x) - 1] for x in starts if x >= position)

    exact = _work(store_client, segment, position, 256)
    assert _expanded(exact.unread) == truth
    assert exact.tail_watermark == watermarks[-1]
    coarse = _work(store_client, segment, position, 3)
    assert len(coarse.unread) <= 3
    assert sum(b.count for b in coarse.unread) == len(truth)
    if not truth:
        return
    for p in (1.0, 0.9, 0.5, 0.1):
        assert percentile_time(coarse.unread, p) <= percentile_time(exact.unread, p)
    # At p = 1: the segment's watermark at the position, as the perfect watermark takes it.
    at_position = watermarks[bisect_left(offsets, position) - 1]
    assert percentile_time(exact.unread, 1.0) == at_position


@pytest.mark.storages("file", "jetstream")
def test_writers_are_told_by_their_assertion_at_the_position(storage, store_client, clock) -> None:
    segment = _segment(store_client)
    stream = segment.rsplit("/", 1)[0]
    slow, fast, gone = (EventWriter(store_client, stream, JsonSerializer()) for _ in range(3))
    for writer, time in ((slow, 100), (fast, 500), (gone, 700)):
        writer.write_event({"t": time})
        writer.flush()
        writer.note_time(time)
    first = store_client.segment_info(segment).write_offset
    clock.advance(10)
    fast.write_event({"t": 900})
    fast.flush()
    fast.note_time(900)
    gone.mark_idle()
    tail = store_client.segment_info(segment).write_offset

    assert _expanded(_work(store_client, segment, first, 8).writers) == [100, 500, 700]
    assert _expanded(_work(store_client, segment, tail, 8).writers) == [100, 900]
    assert _expanded(_work(store_client, segment, 0, 8).writers) == []
    assert _work(store_client, segment, tail, 1).writers == (TimeCount(100, 2),)


def test_too_many_buckets_are_refused_naming_the_value(store_client) -> None:
    segment = _segment(store_client)
    with pytest.raises(InvalidArgumentError, match="257"):
        store_client.plan_read(segment, 0, work_buckets=257)
