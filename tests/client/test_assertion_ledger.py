"""The writer's assertion ledger, without a server: what is due, what rides, what answers change."""

from __future__ import annotations

import pytest

from connector.client.assertion_ledger import (
    AssertionLedger,
    BoundedOutOfOrderness,
    bounded_out_of_orderness,
)
from connector.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    SegmentSealedError,
    StoreUnavailableError,
)
from connector.model import Assertion, AssertionResult

STORED = AssertionResult(stored=True, segments=("s/t/0",))
DUPLICATE = AssertionResult(stored=False, segments=("s/t/0",))


def ledger(numbers_from: int = 0, bound_ms: int = 0) -> AssertionLedger:
    return AssertionLedger(numbers_from, bound_ms, "writer 'w' on s/t")


def stored_at(event_time: int) -> AssertionLedger:
    """A ledger whose first assertion, of ``event_time`` (number 0), the store stored."""
    book = ledger()
    book.ride(event_time)
    send(book)
    return book


def send(book: AssertionLedger, result: AssertionResult = STORED) -> AssertionResult:
    """The waiting assertions go out in one call and the store answers ``result`` to each.

    Returns the answer to the one after the events (or ``result``, when only a joining one went).
    """
    joining, riding = book.joining, book.riding
    with book.sending(joining, riding):
        pass
    if joining is not None:
        book.joined(result)
    return result if riding is None else book.answered(result)


def fail(book: AssertionLedger, error: Exception) -> None:
    """The waiting assertions go out in one call and it fails with ``error``."""
    with pytest.raises(type(error)), book.sending(book.joining, book.riding):
        raise error


def test_bounded_out_of_orderness_is_the_greatest_event_time_less_the_bound_less_one():
    assert bounded_out_of_orderness(1_000, 100) == 899
    watermarks = BoundedOutOfOrderness(100)
    assert watermarks.current_watermark() is None  # no event yet
    for event_time in (1_000, 900, 950):  # late or in bound, never lowers it
        watermarks.on_event(event_time)
    assert watermarks.current_watermark() == 899
    watermarks.on_event(2_000)
    assert watermarks.current_watermark() == 1_899


def test_nothing_is_due_before_an_event_and_the_watermark_is_due_once_until_it_rises():
    book = AssertionLedger(0, 100, "writer 'w' on s/t")
    book.ride(0)
    send(book)  # it holds the watermark: no join is due before its events
    assert book.due() is None
    book.on_event(1_000)
    assert book.due() == 899
    book.ride_due()
    assert (book.joining, book.riding) == (None, Assertion(1, 899))
    send(book)
    assert (book.promised, book.member, book.due()) == (899, True, None)
    book.on_event(950)  # within the bound: the watermark stays
    assert book.due() is None
    book.on_event(1_500)
    assert book.due() == 1_399


def test_after_an_idle_mark_the_same_watermark_is_due_again_to_join_and_a_lower_one_never():
    book = ledger()
    book.on_event(10)
    book.ride_due()
    assert (book.joining, book.riding) == (Assertion(0, 9), None)  # the join says it all
    send(book)
    book.ride(None)  # mark_idle
    send(book)
    assert (book.promised, book.member) == (9, False)
    assert book.due() == 9  # joins again at what it promised
    book.ride(50)
    send(book)
    assert book.due() is None  # the events' watermark is below the promise


def test_events_at_or_below_the_promise_the_store_took_are_counted_late():
    book = ledger()
    book.on_event(5)
    book.ride(20)
    assert (book.joining, book.riding) == (Assertion(0, 4), Assertion(1, 20))
    assert book.late_events == 0
    book.on_event(20)  # not taken by the store yet: not late
    send(book)
    book.on_event(20)
    book.on_event(21)
    book.on_event(3)
    assert book.late_events == 2


def test_assertions_are_numbered_from_numbers_from_and_a_superseded_number_is_never_reused():
    book = ledger(numbers_from=1_000)
    book.ride(5)
    book.ride(6)  # supersedes the first, which may have been sent
    assert book.riding == Assertion(1_001, 6)
    send(book)
    book.ride(None)
    assert book.riding == Assertion(1_002, None)


def test_a_waiting_assertion_goes_before_a_new_due_one():
    book = ledger()
    book.ride(5)
    fail(book, StoreUnavailableError("lost"))
    book.on_event(100)
    book.ride_due()
    assert book.riding == Assertion(0, 5)  # sent again with its number
    assert book.joining is None  # numbered after it, a join would be a duplicate once it lands


# --- joining before the events -------------------------------------------------------------


def test_a_writer_holding_nobody_back_joins_before_its_events_at_their_least_time_less_the_bound():
    book = ledger(bound_ms=100)
    assert not book.holding
    for event_time in (1_000, 700, 900):
        book.on_event(event_time)
    assert book.holding  # a join is due with these events
    book.ride_due()
    assert (book.joining, book.riding) == (Assertion(0, 599), Assertion(1, 899))
    send(book)
    assert (book.promised, book.member, book.late_events) == (899, True, 0)
    book.on_event(2_000)
    book.ride_due()
    assert (book.joining, book.riding) == (None, Assertion(2, 1_899))  # a member: no join


def test_after_an_idle_mark_a_writer_joins_again_never_below_what_it_promised():
    book = ledger(bound_ms=100)
    book.on_event(1_000)
    book.ride_due()
    send(book)
    book.ride(None)
    send(book)
    assert (book.member, book.holding) == (False, False)
    book.on_event(500)  # below its promise: late whatever it does
    book.on_event(1_500)
    book.ride_due()
    assert (book.joining, book.riding) == (Assertion(2, 899), Assertion(3, 1_399))
    assert book.late_events == 1


def test_a_join_is_never_above_the_assertion_the_writer_makes_after_the_events():
    book = ledger()
    book.on_event(1_000)
    book.ride(500)  # note_time(500) after an event of 1000: a weaker promise
    assert (book.joining, book.riding) == (Assertion(0, 500), Assertion(1, 500))
    book.ride(None)  # an idle mark supersedes the assertion, not the join
    assert (book.joining, book.riding) == (Assertion(0, 500), Assertion(2, None))


def test_a_joining_assertion_waits_out_a_lost_answer_or_a_sealed_segment_and_a_refusal_drops_it():
    book = ledger()
    book.on_event(1_000)
    book.join_due()
    assert book.joining == Assertion(0, 999)
    fail(book, StoreUnavailableError("answer lost"))
    fail(book, SegmentSealedError("sealed", "s/t/0", ()))
    assert book.joining == Assertion(0, 999)
    fail(book, InvalidArgumentError("refused"))
    assert book.joining is None
    book.join_due()  # the events it covered are still to come: due again, a new number
    assert book.joining == Assertion(1, 999)
    assert send(book, DUPLICATE) == DUPLICATE  # nothing stored yet: a replay of the writer id
    assert (book.joining, book.promised, book.member) == (None, 999, True)


def test_a_lost_answer_keeps_the_assertion_waiting_and_its_duplicate_answer_is_its_own():
    book = stored_at(5)
    book.ride(6)
    fail(book, StoreUnavailableError("answer lost"))
    assert book.riding == Assertion(1, 6)
    assert send(book, DUPLICATE) == DUPLICATE  # the first send was stored: no error
    assert (book.promised, book.answer(), book.riding) == (6, DUPLICATE, None)


def test_a_duplicate_answer_no_send_explains_means_another_writer_has_the_id():
    book = stored_at(5)
    book.ride(6)
    with pytest.raises(FailedPreconditionError, match="assertion of 6 number 1 of writer 'w'"):
        send(book, DUPLICATE)
    book.ride(None)
    resent = AssertionResult(stored=False, segments=(), resent=True)
    assert send(book, resent) == resent  # the client sent it twice: its own


def test_before_anything_was_stored_a_duplicate_is_a_replay_of_the_writer_id():
    book = ledger()
    book.ride(5)
    assert send(book, DUPLICATE) == DUPLICATE
    assert (book.promised, book.member) == (5, True)


def test_a_refusal_drops_the_assertion_and_changes_no_promise():
    book = stored_at(5)
    book.ride(3)
    fail(book, InvalidArgumentError("below 5"))
    assert (book.riding, book.promised, book.asserted) == (None, 5, 3)
    book.ride(7)
    assert book.riding == Assertion(2, 7)  # the refused number is not reused


def test_a_sealed_segment_refuses_the_append_and_the_assertion_rides_on_the_next_unsent():
    book = stored_at(5)
    book.ride(6)
    fail(book, SegmentSealedError("sealed", "s/t/0", ()))
    assert book.riding == Assertion(1, 6)
    with pytest.raises(FailedPreconditionError):  # not sent before: a duplicate is not its own
        send(book, DUPLICATE)


def test_a_call_that_carries_no_assertion_changes_nothing():
    book = ledger()
    book.ride(5)
    with pytest.raises(InvalidArgumentError), book.sending(None):
        msg = "an append of its own"
        raise InvalidArgumentError(msg)
    assert book.riding == Assertion(0, 5)
