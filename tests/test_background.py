"""The background-task rule: survive a failed round, log once per cause, retry, report.

Times come from the synthetic clock; only the thread and event-loop runners
wait in real time, and their tests poll with bounds.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading

import pytest

from connector.background import BackgroundTask, FailureLog, TaskStatus, default_stall_after_ms
from connector.clock import ManualClock
from connector.errors import InvalidArgumentError, ResourceExhaustedError
from tests.conftest import CLOCK_START_MS, wait_until

PERIOD_MS = 100


class Work:
    """A round of work that fails with whatever ``error`` is set to."""

    def __init__(self) -> None:
        self.error: Exception | None = None
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.error is not None:
            raise self.error


def _task(work: Work, clock: ManualClock, **options) -> BackgroundTask:
    logger = logging.getLogger("tests.background")
    return BackgroundTask("chore", work, period_ms=PERIOD_MS, clock=clock, logger=logger, **options)


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "tests.background"]


def test_a_failed_round_is_counted_and_the_next_one_still_runs(clock: ManualClock) -> None:
    work = Work()
    task = _task(work, clock)
    work.error = RuntimeError("broken")
    assert task.run_round() is False
    clock.advance(PERIOD_MS)
    assert task.run_round() is False
    work.error = None
    clock.advance(PERIOD_MS)
    assert task.run_round() is True
    assert work.calls == 3
    status = task.status()
    assert status.failed_rounds == 2
    assert status.last_success_ms == CLOCK_START_MS + 2 * PERIOD_MS
    assert status.last_failure_ms == CLOCK_START_MS + PERIOD_MS
    assert (status.failing_since_ms, status.last_error, status.running_since_ms) == (None,) * 3


def test_a_run_of_failures_is_logged_once_per_cause_and_its_end_once(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tests.background")
    work = Work()
    task = _task(work, clock)
    full = ResourceExhaustedError("the store is out of disk space")
    work.error = full
    for _ in range(5):
        task.run_round()
    work.error = OSError(errno.EIO, "Input/output error")
    for _ in range(3):
        task.run_round()
    work.error = None
    task.run_round()
    task.run_round()
    work.error = full
    task.run_round()
    what = f"background task 'chore' (every {PERIOD_MS} ms)"
    assert _lines(caplog) == [
        (logging.WARNING, f"{what} is failing: ResourceExhaustedError: {full}"),
        (logging.WARNING, f"{what} is still failing, now: OSError: [Errno 5] Input/output error"),
        (logging.INFO, f"{what} works again after 8 failure(s)"),
        (logging.WARNING, f"{what} is failing: ResourceExhaustedError: {full}"),
    ]
    assert task.status().last_error == f"ResourceExhaustedError: {full}"


def test_a_bug_in_a_round_is_logged_once_with_its_traceback(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    work = Work()
    work.error = KeyError("missing")
    task = _task(work, clock)
    for _ in range(3):
        assert task.run_round() is False
    (record,) = [r for r in caplog.records if r.name == "tests.background"]
    assert record.exc_info is not None and record.exc_info[0] is KeyError


def test_a_task_is_stalled_once_it_has_failed_for_longer_than_its_bound(
    clock: ManualClock,
) -> None:
    work = Work()
    task = _task(work, clock, stall_after_ms=1_000)
    task.run_round()
    assert not task.status().stalled(clock.now_ms() + 10**9), "succeeding: never stalled"
    work.error = RuntimeError("broken")
    task.run_round()
    started_failing = clock.now_ms()
    for _ in range(10):
        clock.advance(PERIOD_MS)
        task.run_round()
    status = task.status()
    assert status.failing_since_ms == started_failing
    assert not status.stalled(started_failing + 1_000), "at its bound: not yet"
    assert status.stalled(started_failing + 1_001)
    work.error = None
    task.run_round()
    assert not task.status().stalled(started_failing + 10**9)


def test_a_round_that_does_not_end_stalls_its_task(clock: ManualClock) -> None:
    release = threading.Event()
    task = _task(release.wait, clock, stall_after_ms=1_000)  # type: ignore[arg-type]
    runner = threading.Thread(target=task.run_round)
    runner.start()
    try:
        status = wait_until(lambda: task.status().running_since_ms is not None and task.status())
        assert isinstance(status, TaskStatus)
        assert not status.stalled(clock.now_ms() + 1_000)
        assert status.stalled(clock.now_ms() + 1_001)
    finally:
        release.set()
        runner.join(timeout=10)
    assert task.status().running_since_ms is None


def test_rounds_run_on_events_retry_a_failure_once_a_period(clock: ManualClock) -> None:
    work = Work()
    task = _task(work, clock)
    assert task.run_round_if_due() is True
    assert task.run_round_if_due() is True, "after a success every event runs a round"
    work.error = OSError(errno.ENOSPC, "No space left on device")
    assert task.run_round_if_due() is False
    clock.advance(PERIOD_MS - 1)
    assert task.run_round_if_due() is None, "retried no sooner than a period later"
    assert work.calls == 3
    clock.advance(1)
    assert task.run_round_if_due() is False
    work.error = None
    clock.advance(PERIOD_MS)
    assert task.run_round_if_due() is True
    assert work.calls == 5


def test_the_thread_runner_survives_failing_rounds_until_stopped(clock: ManualClock) -> None:
    work = Work()
    work.error = RuntimeError("broken")
    task = BackgroundTask("chore", work, period_ms=5, clock=clock).start()
    try:
        wait_until(lambda: task.status().failed_rounds >= 3, what="three failed rounds")
        work.error = None
        wait_until(lambda: task.status().last_success_ms is not None, what="a successful round")
    finally:
        task.stop()
    calls = work.calls
    task.stop()  # twice is harmless
    assert work.calls == calls, "no round after stop"


def test_the_event_loop_runner_survives_failing_rounds(clock: ManualClock) -> None:
    calls: list[int] = []

    async def work() -> None:
        calls.append(len(calls))
        if len(calls) <= 3:
            raise RuntimeError(calls)

    task = BackgroundTask("chore", work, period_ms=1, clock=clock)

    async def run_until_recovered() -> None:
        running = asyncio.create_task(task.run_periodically())
        try:
            for _ in range(5_000):  # at most about 5 s of 1 ms sleeps
                if task.status().last_success_ms is not None:
                    return
                await asyncio.sleep(0.001)
        finally:
            running.cancel()

    asyncio.run(run_until_recovered())
    assert task.status().failed_rounds == 3
    assert task.status().last_success_ms == CLOCK_START_MS


def test_a_period_must_be_positive(clock: ManualClock) -> None:
    with pytest.raises(InvalidArgumentError, match=r"'chore' must be > 0 ms, got 0"):
        BackgroundTask("chore", Work(), period_ms=0, clock=clock)


def test_the_default_stall_bound_is_three_periods_and_at_least_a_second() -> None:
    assert default_stall_after_ms(50) == 1_000
    assert default_stall_after_ms(1_000) == 3_000


def test_a_failure_log_without_failures_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    log = FailureLog("a thing", logging.getLogger("tests.background"))
    assert log.succeeded() is False
    assert log.failed(OSError(errno.EIO, "Input/output error")) is True
    assert log.failed(OSError(errno.EIO, "Input/output error")) is False
    assert log.succeeded() is True
    assert len(_lines(caplog)) == 2
