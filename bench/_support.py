"""What the reader and Spark benchmarks share: a store server subprocess, machine facts, figures.

Not a benchmark itself (``run.py`` runs only ``*_bench.py`` files).
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence

__all__ = [
    "BenchFailure",
    "StoreServerProcess",
    "cpu_model",
    "cpu_seconds",
    "load_average",
    "machine_facts",
    "markdown_table",
    "percentile",
    "print_table",
    "raise_on_signal",
]

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class BenchFailure(Exception):
    """The benchmark could not run or one of its checks failed."""


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class StoreServerProcess:
    """``python -m connector.server`` on ``127.0.0.1:0`` in a temporary data directory.

    Always stopped by :meth:`stop` (SIGTERM, a bounded wait, then SIGKILL);
    use it as a context manager. ``uri`` is known once the server printed
    ``listening on HOST:PORT``.
    """

    def __init__(self, *extra_args: str):
        self._scratch = tempfile.TemporaryDirectory(prefix="tidemark-bench-")
        data_dir = os.path.join(self._scratch.name, "data")
        self._log_path = os.path.join(self._scratch.name, "server.log")
        self._log = open(self._log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.args = list(extra_args)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "connector.server",
                "--data-dir",
                data_dir,
                "--listen",
                "127.0.0.1:0",
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
        )
        try:
            address = self._wait_for_line("listening on", START_TIMEOUT_S).split()[-1]
        except BaseException:
            self.stop()
            raise
        self.uri = f"tidemark://{address}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_seconds(self) -> float | None:
        return cpu_seconds(self.proc.pid)

    def _wait_for_line(self, prefix: str, timeout_s: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        buffered = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while True:
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    text = line.decode(errors="replace").strip()
                    if text.startswith(prefix):
                        return text
                left = deadline - time.monotonic()
                if left <= 0:
                    msg = f"server: no {prefix!r} line within {timeout_s:.0f} s; {self.log_tail()}"
                    raise BenchFailure(msg)
                if selector.select(min(left, 0.5)):
                    chunk = os.read(self.proc.stdout.fileno(), 65536)
                    if not chunk:
                        status = self.proc.wait(STOP_TIMEOUT_S)
                        msg = f"server exited with {status} before {prefix!r}; {self.log_tail()}"
                        raise BenchFailure(msg)
                    buffered += chunk

    def log_tail(self, lines: int = 15) -> str:
        self._log.flush()
        try:
            with open(self._log_path, encoding="utf-8", errors="replace") as file:
                tail = file.read().splitlines()[-lines:]
        except OSError:
            return "no log"
        return "log tail:\n  " + "\n  ".join(tail) if tail else "empty log"

    def stop(self) -> None:
        """Stops the server and removes its data; stopping twice is harmless."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            self.proc.stdout.close()
        if not self._log.closed:
            self._log.close()
        with contextlib.suppress(OSError):
            self._scratch.cleanup()

    def __enter__(self) -> StoreServerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def raise_on_signal(signum: int, _frame: object) -> None:
    """A SIGTERM/SIGHUP handler that unwinds like Ctrl-C, so servers get stopped."""
    name = f"signal {signal.Signals(signum).name}"
    raise KeyboardInterrupt(name)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt inside the block."""
    previous = {s: signal.signal(s, raise_on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# --- facts and figures -----------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average() -> float:
    """The 1-minute load average (NaN where unknown)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def machine_facts(*software: str) -> str:
    """Cores, CPU, RAM, OS, Python, and the ``software`` versions given."""
    memory = ""
    with contextlib.suppress(OSError, ValueError):
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB RAM"
    versions = ", ".join((f"Python {platform.python_version()}", *software))
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} cores ({cpu_model()}){memory}, {system}; {versions}"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        print("  ".join(cells))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "| --- " + "| ---: " * (len(rows[0]) - 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)
