"""A writer's assertion ledger: what it asserted, what is due, what rides on its next append.

The event-time half of :class:`~connector.client.writer.EventWriter` (seed
002), apart from sending, so it is tested without a server (as
:mod:`connector.reader.membership` is for the reader). No method does I/O;
the writer tells the ledger what it sent and what came back.

- **What the writer asserted**: the event time of its latest assertion,
  whatever came of it (:attr:`AssertionLedger.asserted`); the one the store
  took (:attr:`~AssertionLedger.promised`: events at or below it are late);
  whether the writer holds the stream's event-time watermark with it
  (:attr:`~AssertionLedger.member`: an idle mark takes it out).
- **What is due**: with event times taken from the events, Flink's bounded
  out-of-orderness watermark (:class:`BoundedOutOfOrderness`), when it
  would change what the writer promised (:meth:`~AssertionLedger.due`).
- **What rides on the next append**: one numbered assertion at a time
  (:attr:`~AssertionLedger.riding`), on the last append of a flush or
  alone. A number is never reused: an attempt whose fate is unknown may be
  stored.
- **What an answer or a refusal changes**: :meth:`~AssertionLedger.sending`
  around the call that carries it, :meth:`~AssertionLedger.answered` with
  the store's answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from connector.errors import (
    FailedPreconditionError,
    SegmentSealedError,
    StoreUnavailableError,
    TidemarkError,
)
from connector.model import Assertion, AssertionResult

__all__ = ["AssertionLedger", "BoundedOutOfOrderness", "bounded_out_of_orderness"]


def bounded_out_of_orderness(max_event_time: int, bound_ms: int) -> int:
    """Flink's bounded out-of-orderness watermark: max event time seen - bound - 1.

    The least event time still accepted (``bound_ms`` behind the greatest
    seen), less one: every later event within the bound is above it.
    """
    return max_event_time - bound_ms - 1


class BoundedOutOfOrderness:
    """Flink's ``BoundedOutOfOrdernessWatermarks``: two fields, two methods.

    :meth:`on_event` notes an event time; :meth:`current_watermark` is
    :func:`bounded_out_of_orderness` of the greatest noted (None before any
    event, where Flink starts at ``Long.MIN_VALUE``).
    """

    def __init__(self, bound_ms: int):
        self.bound_ms = bound_ms
        self.max_event_time: int | None = None

    def on_event(self, event_time: int) -> None:
        """Notes an event's time."""
        if self.max_event_time is None or event_time > self.max_event_time:
            self.max_event_time = event_time

    def current_watermark(self) -> int | None:
        """The watermark the event times noted so far allow (None before any)."""
        if self.max_event_time is None:
            return None
        return bounded_out_of_orderness(self.max_event_time, self.bound_ms)

    def __repr__(self) -> str:
        return f"BoundedOutOfOrderness({self.bound_ms}, max_event_time={self.max_event_time})"


@dataclass(frozen=True)
class _Riding:
    """An assertion waiting to go; ``sent``: it went out in a call whose fate is unknown."""

    assertion: Assertion
    sent: bool = False


class AssertionLedger:
    """One writer's assertions; see the module.

    ``numbers_from`` is the number of the first assertion (a new
    incarnation's, above any an earlier one used); ``bound_ms`` the
    out-of-orderness bound of event times taken from the events; ``writer``
    names the writer in messages.
    """

    def __init__(self, numbers_from: int, bound_ms: int, writer: str):
        self._writer = writer
        self._numbers = itertools.count(numbers_from)
        self._watermarks = BoundedOutOfOrderness(bound_ms)
        self._riding: _Riding | None = None
        self._last_answer: AssertionResult | None = None
        self._asserted: int | None = None
        self._promised: int | None = None
        self._member = False
        # Whether the store stored an assertion of this writer: from then on a duplicate
        # answer must be explained by an earlier send of its own.
        self._placed = False
        #: Events noted with an event time at or below :attr:`promised`: stored, and
        #: flagged late by readers.
        self.late_events = 0

    # --- what the writer asserted -------------------------------------------------

    @property
    def asserted(self) -> int | None:
        """The event time of the latest assertion numbered, whatever came of it (None: none yet).

        Stored, refused (for instance as below an earlier incarnation's), or
        of unknown fate (the next flush sends it again). A caller following a
        rising watermark (the Flink sink) asserts only above it: one at or
        below it was taken, refused, or is on its way (unless the writer was
        marked idle since).
        """
        return self._asserted

    @property
    def promised(self) -> int | None:
        """The event time of the latest assertion the store took (stored, or held already)."""
        return self._promised

    @property
    def member(self) -> bool:
        """Whether the writer holds the stream's event-time watermark (its last answer a time)."""
        return self._member

    # --- what is due ----------------------------------------------------------------

    def on_event(self, event_time: int) -> None:
        """Notes an event written with ``event_time``: counted late at or below :attr:`promised`."""
        if self._promised is not None and event_time <= self._promised:
            self.late_events += 1
        self._watermarks.on_event(event_time)

    def due(self) -> int | None:
        """The watermark of the events noted, when asserting it would change anything.

        Due when above :attr:`promised`, or equal to it while the writer is
        idle (asserting it joins again); None otherwise and before any event.
        """
        candidate = self._watermarks.current_watermark()
        if candidate is None:
            return None
        promised = self._promised
        if promised is None or candidate > promised or (candidate == promised and not self._member):
            return candidate
        return None

    # --- what rides on the next append --------------------------------------------

    @property
    def riding(self) -> Assertion | None:
        """The assertion the next append carries (or that goes alone), if one waits."""
        return None if self._riding is None else self._riding.assertion

    def ride(self, event_time: int | None) -> None:
        """Numbers an assertion of ``event_time`` (None: an idle mark) to send next.

        It supersedes one still waiting (whose number is not reused).
        """
        self._riding = _Riding(Assertion(next(self._numbers), event_time))
        self._last_answer = None
        if event_time is not None:
            self._asserted = event_time

    def ride_due(self) -> None:
        """Numbers the :meth:`due` assertion, unless one waits already (it goes first)."""
        due = self.due()
        if due is not None and self._riding is None:
            self.ride(due)

    # --- what an answer or a refusal changes ---------------------------------------

    @contextmanager
    def sending(self, assertion: Assertion | None) -> Iterator[None]:
        """Around a call that carries ``assertion`` (None: one that carries none).

        A lost answer (:class:`StoreUnavailableError`) leaves it waiting,
        marked sent: it goes again with its number, and a duplicate answer
        is then its own. A refusal (any other :class:`TidemarkError`) drops
        it: nothing was stored. A sealed segment refuses an append for its
        own reasons before deciding the assertion, which waits for the next.
        """
        try:
            yield
        except StoreUnavailableError:
            if assertion is not None and self._riding is not None:
                self._riding = replace(self._riding, sent=True)
            raise
        except TidemarkError as error:
            if assertion is not None and not isinstance(error, SegmentSealedError):
                self._riding = None
            raise

    def answered(self, result: AssertionResult) -> AssertionResult:
        """Notes the store's answer to the waiting assertion (alone or riding); returns it.

        Raises:
            FailedPreconditionError: the store had the assertion's number,
                and no earlier send of this writer can explain it (another
                writer is using its id).
        """
        riding = self._riding
        assert riding is not None, "an answer to no assertion"
        self._riding = None
        self._last_answer = result
        event_time = riding.assertion.event_time
        if result.stored:
            self._placed = True
        elif not (result.resent or riding.sent) and self._placed:
            what = "idle mark" if event_time is None else f"assertion of {event_time}"
            msg = (
                f"the store took {what} number {riding.assertion.number} of {self._writer} "
                "as a duplicate, but this writer never sent it before: another writer is "
                "using its id"
            )
            raise FailedPreconditionError(msg)
        self._member = event_time is not None
        if event_time is not None:
            self._promised = event_time
        return result

    def answer(self) -> AssertionResult:
        """The store's answer to the latest assertion numbered (after it was :meth:`answered`)."""
        assert self._last_answer is not None, "no answer yet"
        return self._last_answer

    def __repr__(self) -> str:
        return (
            f"AssertionLedger({self._writer}, asserted={self._asserted}, "
            f"promised={self._promised}, member={self._member}, riding={self.riding})"
        )
