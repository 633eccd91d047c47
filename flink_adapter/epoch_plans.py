"""The coordinator's epoch plans, made on its store thread; after an idle one, waited for there.

An idle epoch is cheap (one small ``DescribeTails`` call), but one every
``epoch_interval_ms`` (50 ms) still makes the store answer about twenty
calls a second for nothing. So, as Spark's ``idleWait`` does, an epoch
after one that found nothing new asks the store to answer at its first
change (an event, a watermark, a seal) or after ``idle_wait_ms``
(:meth:`~connector.reader.source.SourcePlanner.step` with ``wait_ms``): an
idle job asks about four times a second at the default 250 ms, and a
change still ends the wait at once.

Where that wait is held matters in Flink. The coordinator plans in a
processing-time timer, on the operator's mailbox thread (in process mode
in a Python bundle the operator waits for before it takes a checkpoint
barrier). Whatever runs there holds the rest of the mailbox: a wait of
250 ms there would hold every checkpoint barrier behind it for up to that
long (the coordinator, parallelism 1, is on every checkpoint's path), and
a cancel would wait for the timer to return. So a plan that may wait is
never waited for in a timer: :meth:`EpochPlans.take` hands it to the
store thread (:mod:`flink_adapter.store_thread`) and returns None at once;
each later timer (every ``epoch_interval_ms``) looks whether it came back,
without waiting, and the coordinator emits its epoch then. Checkpoints and
cancels pass between timers as they always did, however long the wait;
closing the coordinator closes the store thread's client, which ends the
parked call in flight at once. A change waits at most one epoch interval
more to go out than without the wait: what an epoch did before.

A plan that does not wait (the first, and every one after an epoch that
found something) is one quick call, waited for in its timer as before, so
a busy stream's epochs go out as soon as they are planned.

The frontier in keyed state moves only in the timer that emits the plan's
epoch: a checkpoint taken while a plan is parked holds the frontier that
plan started from, and a restored coordinator plans again from there, so
no event is lost or read twice. The bound, at most the store's 30 s
(``MAX_WAIT_MS``, the longest it parks a call), trades nothing of latency,
only how often the store is asked and how soon the coordinator's figures
(``pendingRecords`` and the delays, counted when a plan comes back) and a
silently vanished store are noticed; 250 ms keeps them within a second.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connector.reader.source import Frontier, SourcePlanner, Step
    from flink_adapter.store_thread import StoreThread

__all__ = ["EpochPlans"]


class EpochPlans:
    """Each epoch's step, planned on ``store``'s thread; one after an idle epoch waits there.

    Not thread-safe: the coordinator's timers call it, one at a time.
    """

    def __init__(self, store: StoreThread, planner: SourcePlanner, idle_wait_ms: int):
        self._store = store
        self._planner = planner
        self._idle_wait_ms = idle_wait_ms
        self._idle = False  # the last step found nothing new
        self._parked: tuple[Frontier, Future[Step]] | None = None  # a waiting step, in flight

    def __repr__(self) -> str:
        return f"EpochPlans(idle_wait_ms={self._idle_wait_ms!r}, parked={self.parked!r})"

    @property
    def parked(self) -> bool:
        """Whether a step waits on the store and has not come back yet (take would return None)."""
        return self._parked is not None and not self._parked[1].done()

    def take(self, previous: Frontier) -> Step | None:
        """The step after ``previous``; None while it is still waited for on the store.

        After a step that found nothing new (its frontier is its previous),
        the step is made on the store thread and asks the store to wait
        for a change, at most ``idle_wait_ms``: this returns None at once,
        and the step once it came back (looked at without waiting). Any
        other step is planned now, its call waited for.

        Raises:
            StoreThreadClosed: the coordinator is closing.
            TidemarkError: what planning failed with.
        """
        parked = self._parked
        if parked is not None and parked[0] is not previous:
            parked = None  # planned from another frontier: not this epoch's
        if parked is None:
            wait_ms = self._idle_wait_ms if self._idle else 0
            future = self._store.submit(self._planner.step, previous, None, wait_ms)
            if wait_ms:
                parked = self._parked = (previous, future)
            else:
                return self._taken(previous, future)
        if not parked[1].done():
            return None
        return self._taken(previous, parked[1])

    def _taken(self, previous: Frontier, future: Future[Step]) -> Step:
        self._parked = None
        step = self._store.result(future)
        self._idle = step.frontier is previous
        return step
