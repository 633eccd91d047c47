"""Gathering a running PyFlink job's output: a thread drains ``execute_and_collect``."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

_log = logging.getLogger("examples.job_output")


class Collected:
    """The JSON rows a job has produced so far; :meth:`wait_for` polls them with a bound."""

    def __init__(self, results: Any):
        self.rows: list[dict[str, Any]] = []
        self.condition = threading.Condition()
        self.finished = False
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._drain, args=(results,), daemon=True)
        self.thread.start()

    def _drain(self, results: Any) -> None:
        try:
            for text in results:
                with self.condition:
                    self.rows.append(json.loads(text))
                    self.condition.notify_all()
        except Exception as error:  # noqa: BLE001 - closing the results cancels the job
            _log.debug("results closed", exc_info=True)
            self.error = error
        with self.condition:
            self.finished = True
            self.condition.notify_all()

    def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], Any], what: str, timeout: float = 90.0
    ) -> None:
        """Waits until ``predicate(rows)`` holds; fails naming ``what`` after ``timeout`` s."""
        with self.condition:
            if not self.condition.wait_for(lambda: predicate(self.rows), timeout=timeout):
                msg = f"timed out waiting for {what}; got {self.rows!r}"
                raise AssertionError(msg)

    def wait_until_finished(self, timeout: float = 120.0) -> list[dict[str, Any]]:
        """Waits for a bounded job's last row; returns every row."""
        self.wait_for(lambda _rows: self.finished, "the job to finish", timeout)
        if self.error is not None:
            raise self.error
        return self.rows
