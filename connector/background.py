"""Background tasks: work done every period that survives its failures and says when it stalls.

Every periodic task of a server (a storage's idle advancer, journal
compaction, the health watcher) follows one rule, written here:

- **survive**: a round that raises is a failed round, never the end of the
  task;
- **log once**: the first failure is logged with its cause, and again only
  when the cause changes; the first success after failures is logged with
  how many rounds failed (:class:`FailureLog`);
- **retry**: the next round comes a period later; a task run on events
  rather than a timer retries a failed round no sooner than a period later
  (:meth:`BackgroundTask.run_round_if_due`);
- **report**: :meth:`BackgroundTask.status` says how many rounds failed, when
  the last one succeeded, since when it fails, and whether the task is
  stalled (:meth:`TaskStatus.stalled`) so metrics and health can show it.

Times are read from an injected :class:`~connector.clock.Clock` (epoch ms),
so tests drive them with a synthetic clock; only the wait between the rounds
of :meth:`BackgroundTask.start` and :meth:`BackgroundTask.run_periodically`
is real time. Nothing here knows of a storage: any storage's tasks use it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from connector.clock import Clock
from connector.errors import InvalidArgumentError, TidemarkError

__all__ = ["BackgroundTask", "FailureLog", "TaskStatus", "default_stall_after_ms"]

_log = logging.getLogger(__name__)

#: A task is stalled after this many periods without success...
STALL_PERIODS = 3
#: ...and never sooner than this (ms), so a short hiccup of a fast task is not a stall.
MIN_STALL_MS = 1_000


def default_stall_after_ms(period_ms: int) -> int:
    """How long a task of ``period_ms`` may fail before it counts as stalled."""
    return max(STALL_PERIODS * period_ms, MIN_STALL_MS)


def _cause(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class FailureLog:
    """Logs a run of failures once per cause, and its end; thread-safe.

    ``what`` names the failing thing in every line (``"background task
    'idle_ticks'"``). An error that is neither a :class:`TidemarkError` nor
    an :class:`OSError` is a bug: its first line carries the traceback.
    """

    def __init__(self, what: str, logger: logging.Logger = _log):
        self.what = what
        self._logger = logger
        self._lock = threading.Lock()
        self._cause: str | None = None
        self._failures = 0

    def failed(self, error: BaseException) -> bool:
        """Counts a failure; logs it when it starts a run or its cause changed. Returns whether."""
        cause = _cause(error)
        with self._lock:
            self._failures += 1
            first, changed = self._cause is None, cause != self._cause
            self._cause = cause
        if not changed:
            return False
        bug = not isinstance(error, TidemarkError | OSError)
        if first:
            self._logger.warning(
                "%s is failing: %s", self.what, cause, exc_info=error if bug else None
            )
        else:
            self._logger.warning(
                "%s is still failing, now: %s", self.what, cause, exc_info=error if bug else None
            )
        return True

    def succeeded(self) -> bool:
        """Ends a run of failures, logging how long it was; returns whether there was one."""
        with self._lock:
            failures, self._failures, self._cause = self._failures, 0, None
        if failures:
            self._logger.info("%s works again after %d failure(s)", self.what, failures)
        return bool(failures)


@dataclass(frozen=True)
class TaskStatus:
    """What a background task has done, as of :meth:`BackgroundTask.status` (times: epoch ms).

    Attributes:
        name: the task's name (a metric label: letters, digits and ``_``).
        period_ms: how often its rounds come.
        stall_after_ms: how long it may fail (or one round run) before it is stalled.
        failed_rounds: rounds that raised, since the task was made.
        last_success_ms: when the last successful round ended; None before one did.
        last_failure_ms: when the last failed round ended; None before one did.
        failing_since_ms: when the first failed round since the last success
            ended; None while the last round succeeded.
        running_since_ms: when the round in progress began; None between rounds.
        last_error: the cause of the last failure (``Type: message``); None
            while the last round succeeded.
    """

    name: str
    period_ms: int
    stall_after_ms: int
    failed_rounds: int = 0
    last_success_ms: int | None = None
    last_failure_ms: int | None = None
    failing_since_ms: int | None = None
    running_since_ms: int | None = None
    last_error: str | None = None

    def stalled(self, now_ms: int) -> bool:
        """Whether the task makes no progress: failing, or in one round, for over its bound."""
        return any(
            since is not None and now_ms - since > self.stall_after_ms
            for since in (self.failing_since_ms, self.running_since_ms)
        )


class BackgroundTask:
    """A round of work run every ``period_ms``, by the rule of this module.

    ``work`` does one round: a function (for :meth:`run_round`,
    :meth:`run_round_if_due` and :meth:`start`) or a coroutine function (for
    :meth:`run_round_async` and :meth:`run_periodically`); what it returns is
    ignored, what it raises is a failed round. Its rounds never overlap when
    one of these runs them; the status may be read from any thread.
    """

    def __init__(
        self,
        name: str,
        work: Callable[[], Any],
        *,
        period_ms: int,
        clock: Clock,
        stall_after_ms: int | None = None,
        logger: logging.Logger = _log,
    ):
        if not isinstance(period_ms, int) or period_ms <= 0:
            msg = f"the period of background task {name!r} must be > 0 ms, got {period_ms!r}"
            raise InvalidArgumentError(msg)
        self._work = work
        self._clock = clock
        self._lock = threading.Lock()
        self._status = TaskStatus(
            name,
            period_ms,
            default_stall_after_ms(period_ms) if stall_after_ms is None else stall_after_ms,
        )
        self._failures = FailureLog(f"background task {name!r} (every {period_ms} ms)", logger)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        """The task's name."""
        return self._status.name

    def status(self) -> TaskStatus:
        """What the task has done so far (a snapshot)."""
        with self._lock:
            return self._status

    # --- one round ----------------------------------------------------------------

    def run_round(self) -> bool:
        """Runs one round now; returns whether it succeeded. Never raises an ``Exception``."""
        self._began()
        try:
            self._work()
        except Exception as error:
            return self._ended(error)
        return self._ended(None)

    def run_round_if_due(self) -> bool | None:
        """Runs a round unless the last one failed less than a period ago (by the clock).

        For tasks run on events rather than a timer, so a failing round is
        retried once a period however often the events come. Returns None
        when it skipped the round, else whether the round succeeded.
        """
        status = self.status()
        last_failure = status.last_failure_ms
        if status.failing_since_ms is not None and last_failure is not None:
            if self._clock.now_ms() - last_failure < status.period_ms:
                return None
        return self.run_round()

    async def run_round_async(self) -> bool:
        """Awaits one round of a coroutine function; returns whether it succeeded."""
        self._began()
        try:
            await self._work()
        except Exception as error:
            return self._ended(error)
        return self._ended(None)

    def _began(self) -> None:
        with self._lock:
            self._status = replace(self._status, running_since_ms=self._clock.now_ms())

    def _ended(self, error: Exception | None) -> bool:
        now = self._clock.now_ms()
        with self._lock:
            status = self._status
            changes: dict[str, Any]
            if error is None:
                changes = {"last_success_ms": now, "failing_since_ms": None, "last_error": None}
            else:
                since = now if status.failing_since_ms is None else status.failing_since_ms
                changes = {
                    "failed_rounds": status.failed_rounds + 1,
                    "last_failure_ms": now,
                    "failing_since_ms": since,
                    "last_error": _cause(error),
                }
            self._status = replace(status, running_since_ms=None, **changes)
        if error is None:
            self._failures.succeeded()
            return True
        self._failures.failed(error)
        return False

    # --- running every period ----------------------------------------------------

    def start(self) -> BackgroundTask:
        """Runs a round every period on a daemon thread of its own until :meth:`stop`."""
        self._thread = threading.Thread(
            target=self._run_periodically, name=f"tidemark-{self.name}", daemon=True
        )
        self._thread.start()
        return self

    def _run_periodically(self) -> None:
        while not self._stop.wait(self._status.period_ms / 1000):
            self.run_round()

    def stop(self) -> None:
        """Stops :meth:`start`'s thread after its round in progress; stopping twice is harmless."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    async def run_periodically(self) -> None:
        """Awaits a round every period on the running event loop, until cancelled."""
        while True:
            await asyncio.sleep(self._status.period_ms / 1000)
            await self.run_round_async()

    def __repr__(self) -> str:
        status = self.status()
        return (
            f"BackgroundTask({status.name!r}, period_ms={status.period_ms}, "
            f"failed_rounds={status.failed_rounds})"
        )
