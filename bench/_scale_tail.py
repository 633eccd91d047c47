"""The scale benchmarks' consumers in a process of their own, and the probes they are timed with.

Not a benchmark itself (the benchmarks are listed in :mod:`bench.registry`).
:class:`TailingProcess` runs :mod:`bench._scale_client` and keeps what it
says; :func:`probe` sends events one at a time on a fixed schedule and
times each from its acknowledgement to the client's seeing it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench._support import STOP_TIMEOUT_S, ChildProcess, percentile

__all__ = ["Probes", "TailingProcess", "probe"]


class TailingProcess:
    """``python -m bench._scale_client ARGS``: its probes seen, its watermark reads, its count.

    ``probes`` maps a probe's id to the wall time the client saw it;
    ``watermarks`` holds (wall time, watermark) of each watermark read;
    ``others`` the events that were not probes, known once stopped.
    """

    def __init__(self, args: Sequence[str], log_path: str, name: str):
        argv = [sys.executable, "-m", "bench._scale_client", *args]
        self.name = name
        self.child = ChildProcess(argv, log_path, name=name)
        self.ready = threading.Event()
        self.probes: dict[str, float] = {}
        self.watermarks: list[tuple[float, int]] = []
        self.others: int | None = None
        self._lines = threading.Thread(target=self._follow, name=f"{name}-lines", daemon=True)
        self._lines.start()

    @property
    def pid(self) -> int:
        return self.child.pid

    def _follow(self) -> None:
        assert self.child.proc.stdout is not None
        for raw in self.child.proc.stdout:
            word, *rest = raw.decode(errors="replace").split()
            if word == "ready":
                self.ready.set()
            elif word == "p":
                self.probes.setdefault(rest[0], float(rest[1]))
            elif word == "w":
                self.watermarks.append((float(rest[1]), int(rest[0])))
            elif word == "n":
                self.others = int(rest[0])

    def wait_ready(self, timeout_s: float) -> None:
        """Returns once the client tails; BenchFailure (its log) if not within ``timeout_s``."""
        self.child.wait_until(self.ready.is_set, "tailing", timeout_s)

    def stop(self) -> None:
        """Stops the client, letting it say its count first; stopping twice is harmless."""
        proc = self.child.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._lines.join(STOP_TIMEOUT_S)
        self.child.stop()

    def __enter__(self) -> TailingProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Probes:
    """Probes sent, and each seen one's latency from its acknowledgement to the client, ms."""

    sent: int
    values_ms: list[float]

    @property
    def missed(self) -> int:
        """Probes the client had not seen when the wait for them ended."""
        return self.sent - len(self.values_ms)

    @property
    def figures(self) -> dict[str, float]:
        """``probes``, ``p50_ms``, ``p99_ms``, ``max_ms``, ``missed``."""
        return {
            "probes": self.sent,
            "p50_ms": percentile(self.values_ms, 50),
            "p99_ms": percentile(self.values_ms, 99),
            "max_ms": max(self.values_ms, default=float("nan")),
            "missed": self.missed,
        }


def probe(
    send: Callable[[int, str], None],
    seen: dict[str, float],
    count: int,
    interval_s: float,
    grace_s: float,
) -> Probes:
    """Sends ``count`` probes ``interval_s`` apart, then waits at most ``grace_s`` for the rest.

    ``send(number, id)`` writes probe ``id`` (``number`` from 0) and
    returns once it is acknowledged; ``seen`` is filled by the client's
    process as it sees them (:attr:`TailingProcess.probes`).
    """
    acked: dict[str, float] = {}
    began = time.monotonic()
    for number in range(count):
        time.sleep(max(0.0, began + number * interval_s - time.monotonic()))
        ident = f"{os.getpid()}-{time.monotonic_ns()}-{number}"
        send(number, ident)
        acked[ident] = time.time()
    deadline = time.monotonic() + grace_s
    while any(ident not in seen for ident in acked) and time.monotonic() < deadline:
        time.sleep(0.05)
    return Probes(count, [(seen[i] - at) * 1000 for i, at in acked.items() if i in seen])
