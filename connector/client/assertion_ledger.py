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
  would change what the writer promised (:meth:`~AssertionLedger.due`);
  and, while the writer holds nobody back (it never asserted, or marked
  itself idle), a joining assertion before its next events: at the least
  event time noted since, less the bound, less 1
  (:meth:`~AssertionLedger.join_due`), so none of those events within the
  bound is late because the writer was not in the set yet.
- **What rides on the next append**: at most one numbered assertion after
  the events (:attr:`~AssertionLedger.riding`, on the last append of a
  flush or alone) and one before them (:attr:`~AssertionLedger.joining`,
  on the next append, or alone first), numbered in the order the store
  applies them. A number is never reused: an attempt whose fate is
  unknown may be stored.
- **What an answer or a refusal changes**: :meth:`~AssertionLedger.sending`
  around the call that carries them, :meth:`~AssertionLedger.answered` and
  :meth:`~AssertionLedger.joined` with the store's answers.
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


def _sent(waiting: _Riding | None, carried: tuple[Assertion | None, ...]) -> _Riding | None:
    """``waiting``, marked sent if the call carried it."""
    if waiting is None or waiting.assertion not in carried:
        return waiting
    return replace(waiting, sent=True)


def _dropped(waiting: _Riding | None, carried: tuple[Assertion | None, ...]) -> _Riding | None:
    """``waiting``, unless the call (refused) carried it."""
    return None if waiting is not None and waiting.assertion in carried else waiting


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
        self._joining: _Riding | None = None
        # The least event time noted while the writer held nobody back: what a join covers.
        self._unjoined_least: int | None = None
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
        if not self._member:
            least = self._unjoined_least
            self._unjoined_least = event_time if least is None else min(least, event_time)

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

    def join_due(self, ceiling: int | None = None) -> None:
        """Numbers a joining assertion to go before the writer's next events, when one is due.

        Due while the writer holds nobody back (it never asserted, or marked
        itself idle) and events were noted since: at the least of their
        times less the bound less 1 (every event within the bound of the
        greatest is above it; 0 at the least, as the store takes no time
        below), never below what the writer promised (a watermark never
        steps back) nor above ``ceiling`` (the assertion it makes after
        them). Not while an assertion waits already: that one is numbered
        first, and the store applies them in their numbers' order.
        """
        least = self._unjoined_least
        if self._member or least is None or self._joining is not None or self._riding is not None:
            return
        join = max(bounded_out_of_orderness(least, self._watermarks.bound_ms), 0)
        if self._promised is not None:
            join = max(join, self._promised)
        if ceiling is not None:
            join = min(join, ceiling)
        self._joining = _Riding(Assertion(next(self._numbers), join))
        self._asserted = join

    # --- what rides on the next append --------------------------------------------

    @property
    def riding(self) -> Assertion | None:
        """The assertion the next append carries after its events (or that goes alone), if any."""
        return None if self._riding is None else self._riding.assertion

    @property
    def joining(self) -> Assertion | None:
        """The assertion the next append carries before its events (or that goes alone), if any."""
        return None if self._joining is None else self._joining.assertion

    @property
    def holding(self) -> bool:
        """Whether the writer holds the watermark, or will once what waits or is due was sent.

        A writer closing then marks itself idle.
        """
        return (
            self._member
            or self._riding is not None
            or self._joining is not None
            or self._unjoined_least is not None
        )

    def ride(self, event_time: int | None) -> None:
        """Numbers an assertion of ``event_time`` (None: an idle mark) to send next.

        It supersedes one still waiting (whose number is not reused); a
        joining assertion due before the events goes first (:meth:`join_due`).
        """
        self._riding = None
        self.join_due(ceiling=event_time)
        self._riding = _Riding(Assertion(next(self._numbers), event_time))
        self._last_answer = None
        if event_time is not None:
            self._asserted = event_time

    def ride_due(self) -> None:
        """Numbers the due joining assertion, then the :meth:`due` one after the events.

        Unless one waits already (it goes first), or the joining one says as much.
        """
        self.join_due()
        due = self.due()
        if due is None or self._riding is not None:
            return
        joining = self.joining
        if joining is None or joining.event_time is None or due > joining.event_time:
            self.ride(due)

    # --- what an answer or a refusal changes ---------------------------------------

    @contextmanager
    def sending(self, *assertions: Assertion | None) -> Iterator[None]:
        """Around a call that carries ``assertions`` (None, or none: one that carries none).

        A lost answer (:class:`StoreUnavailableError`) leaves them waiting,
        marked sent: they go again with their numbers, and a duplicate answer
        is then their own. A refusal (any other :class:`TidemarkError`) drops
        them: nothing was stored. A sealed segment refuses an append for its
        own reasons before deciding the assertions, which wait for the next.
        """
        try:
            yield
        except StoreUnavailableError:
            self._riding = _sent(self._riding, assertions)
            self._joining = _sent(self._joining, assertions)
            raise
        except TidemarkError as error:
            if not isinstance(error, SegmentSealedError):
                self._riding = _dropped(self._riding, assertions)
                self._joining = _dropped(self._joining, assertions)
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
        return self._took(riding, result)

    def joined(self, result: AssertionResult) -> AssertionResult:
        """Notes the store's answer to the joining assertion (before events, or alone); returns it.

        Raises:
            FailedPreconditionError: as :meth:`answered`.
        """
        joining = self._joining
        assert joining is not None, "an answer to no joining assertion"
        self._joining = None
        return self._took(joining, result)

    def _took(self, waited: _Riding, result: AssertionResult) -> AssertionResult:
        """What the answer to ``waited`` changes: where the writer stands, what it promised."""
        event_time = waited.assertion.event_time
        if result.stored:
            self._placed = True
        elif not (result.resent or waited.sent) and self._placed:
            what = "idle mark" if event_time is None else f"assertion of {event_time}"
            msg = (
                f"the store took {what} number {waited.assertion.number} of {self._writer} "
                "as a duplicate, but this writer never sent it before: another writer is "
                "using its id"
            )
            raise FailedPreconditionError(msg)
        self._member = event_time is not None
        if event_time is not None:
            self._promised = event_time
            self._unjoined_least = None
        return result

    def answer(self) -> AssertionResult:
        """The store's answer to the latest assertion numbered (after it was :meth:`answered`)."""
        assert self._last_answer is not None, "no answer yet"
        return self._last_answer

    def __repr__(self) -> str:
        return (
            f"AssertionLedger({self._writer}, asserted={self._asserted}, "
            f"promised={self._promised}, member={self._member}, joining={self.joining}, "
            f"riding={self.riding})"
        )
