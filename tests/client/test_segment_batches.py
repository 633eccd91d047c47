"""A writer's batches and their numbers, without a server: what each append carries."""

from __future__ import annotations

from connector.client.batches import SegmentBatches
from connector.model import AppendResult, Fence


def appended(count: int, duplicates: int = 0, resent: bool = False) -> AppendResult:
    return AppendResult(0, 7, count - duplicates, duplicates, resent)


def batches(numbers_from: int = 0, max_events: int = 100) -> SegmentBatches:
    return SegmentBatches("w", numbers_from, 1 << 20, max_events)


def test_a_batch_is_full_at_its_event_limit_and_batches_go_in_the_order_started():
    queue = batches(max_events=2)
    assert not queue.add("s/t/1", b"a", 0.7, "k")
    assert not queue.add("s/t/0", b"b", 0.1, "")
    assert queue.add("s/t/1", b"c", 0.7, "k")
    assert (queue.next_segment(), queue.pending_events) == ("s/t/1", 3)
    batch = queue.take("s/t/1")
    assert list(batch.queued()) == [(b"a", 0.7, "k"), (b"c", 0.7, "k")]
    assert queue.take("s/t/0").routing_keys is None  # no event has a key
    assert queue.next_segment() is None


def test_events_are_numbered_per_segment_and_a_failed_batch_keeps_its_numbers():
    queue = batches()
    queue.add("s/t/0", b"a", 0.1, "")
    queue.add("s/t/0", b"b", 0.1, "")
    batch = queue.take("s/t/0")
    assert queue.stored("s/t/0", queue.first_number("s/t/0"), batch, appended(2)) is None
    assert queue.first_number("s/t/0") == 2
    queue.add("s/t/0", b"c", 0.1, "")
    failed = queue.take("s/t/0")
    queue.keep("s/t/0", failed)  # its answer was lost: it goes again, numbered 2
    assert (queue.first_number("s/t/0"), queue.pending_events) == (2, 1)
    again = queue.take("s/t/0")
    assert queue.stored("s/t/0", 2, again, appended(1, duplicates=1)) is None  # its own copy
    assert (queue.first_number("s/t/0"), queue.stored_times()) == (3, {"s/t/0": 7})
    assert queue.stored_times() == {}  # since the last call


def test_duplicates_no_send_explains_are_named_once_the_writer_stored_in_the_segment():
    queue = batches()
    queue.add("s/t/0", b"a", 0.1, "")
    assert queue.stored("s/t/0", 0, queue.take("s/t/0"), appended(1, duplicates=1)) is None
    queue.add("s/t/0", b"b", 0.1, "")
    assert queue.stored("s/t/0", 1, queue.take("s/t/0"), appended(1)) is None
    for payload in (b"c", b"d"):
        queue.add("s/t/0", payload, 0.1, "x")
    error = queue.stored("s/t/0", 2, queue.take("s/t/0"), appended(2, duplicates=1))
    assert error is not None
    assert (error.first_event_number, error.events, error.routing_keys) == (2, (b"c",), ("x",))
    assert "numbers 2 to 2 of writer 'w'" in str(error)


def test_a_discarded_batch_that_was_sent_leaves_a_gap_the_next_append_or_a_fence_closes():
    queue = batches()
    queue.add("s/t/0", b"a", 0.1, "")
    queue.keep("s/t/0", queue.take("s/t/0"))
    queue.add("s/t/1", b"never sent", 0.9, "")
    assert queue.discard_pending() == 2
    assert (queue.first_number("s/t/0"), queue.announced("s/t/0")) == (1, 0)
    assert (queue.first_number("s/t/1"), queue.announced("s/t/1")) == (0, None)
    assert queue.fences() == {"s/t/0": Fence(0, 1)}
    queue.add("s/t/1", b"b", 0.9, "")
    queue.take("s/t/1")
    assert not queue.may_carry_assertion("s/t/1")  # the gap in s/t/0 needs a fence
    queue.fenced(queue.fences())
    assert (queue.fences(), queue.announced("s/t/0"), queue.may_carry_assertion("s/t/1")) == (
        {},
        None,
        True,
    )


def test_a_new_incarnation_announces_the_numbers_below_its_own_in_each_segment_once():
    queue = batches(numbers_from=1_000)
    assert (queue.first_number("s/t/0"), queue.announced("s/t/0")) == (1_000, 0)
    queue.add("s/t/0", b"a", 0.1, "")
    queue.stored("s/t/0", 1_000, queue.take("s/t/0"), appended(1))
    assert (queue.first_number("s/t/0"), queue.announced("s/t/0")) == (1_001, None)


def test_the_batches_of_segments_no_longer_open_are_taken_out_for_rerouting():
    queue = batches()
    for segment in ("s/t/0", "s/t/1", "s/t/2"):
        queue.add(segment, segment.encode(), 0.5, "")
    stranded = queue.take_stranded({"s/t/2", "s/t/3"})
    assert [b.events for b in stranded] == [[b"s/t/0"], [b"s/t/1"]]
    assert (queue.next_segment(), queue.pending_events) == ("s/t/2", 1)
