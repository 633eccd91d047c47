"""What the benchmarks share: child processes (store server, redis-server), timing, facts, figures.

Not a benchmark itself (the benchmarks are listed in :mod:`bench.registry`).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import platform
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "EVENT_BYTES",
    "BenchFailure",
    "ChildProcess",
    "StoreServerProcess",
    "TimedEvents",
    "Timing",
    "cpu_model",
    "children",
    "cpu_seconds",
    "descendants",
    "free_port",
    "load_average",
    "machine_facts",
    "java_version",
    "json_event",
    "package_version",
    "percentile",
    "positive",
    "raise_on_signal",
    "signals_interrupt",
    "timed",
    "write_store_and_files",
]

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class BenchFailure(Exception):
    """The benchmark could not run or one of its checks failed."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a child that takes its port from a flag)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def children(pid: int) -> list[int]:
    """The processes ``pid`` started, from ``/proc`` (Linux; [] elsewhere).

    Read from each of its threads: a child forked by a thread other than the
    main one (a JVM starting Python workers) is listed under that thread only.
    """
    found = []
    for listing in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError), open(listing, encoding="ascii") as file:
            found += map(int, file.read().split())
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``: its children, theirs, and so on."""
    found, todo = [], [pid]
    while todo:
        below = children(todo.pop())
        found += below
        todo += below
    return found


@dataclass
class Timing:
    """Wall seconds of a timed block, and the CPU seconds client (this process) and server used."""

    seconds: float = float("nan")
    client_cpu: float = float("nan")
    server_cpu: float | None = None

    @property
    def cpu_text(self) -> str:
        """``client / server`` CPU seconds, ``?`` for a server figure not known."""
        server = "?" if self.server_cpu is None else f"{self.server_cpu:.2f}"
        return f"{self.client_cpu:.2f} / {server}"


@dataclass
class TimedEvents:
    """Events moved in a timed block, and its :class:`Timing`."""

    events: int
    timing: Timing

    @property
    def seconds(self) -> float:
        return self.timing.seconds

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


@contextlib.contextmanager
def timed(server_pid: int) -> Iterator[Timing]:
    """Times the block; the :class:`Timing` yielded is filled in when the block ends normally."""
    timing = Timing()
    server_before = cpu_seconds(server_pid)
    cpu_before = time.process_time()
    start = time.perf_counter()
    yield timing
    timing.seconds = time.perf_counter() - start
    timing.client_cpu = time.process_time() - cpu_before
    server_after = cpu_seconds(server_pid)
    if server_before is not None and server_after is not None:
        timing.server_cpu = server_after - server_before


class ChildProcess:
    """A subprocess that is always stopped by :meth:`stop`: SIGTERM, a bounded wait, then SIGKILL.

    Its stderr, and its stdout unless ``capture_stdout`` (then read with
    :meth:`wait_for_line`), go to ``log_path``. ``name`` names it in messages.
    Use it as a context manager.
    """

    def __init__(
        self, argv: Sequence[str], log_path: str, *, name: str, capture_stdout: bool = True
    ):
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        try:
            self.proc = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE if capture_stdout else self._log,
                stderr=self._log,
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            self._log.close()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for_line(self, prefix: str, timeout_s: float = START_TIMEOUT_S) -> str:
        """The first line of stdout that starts with ``prefix``; bounded by ``timeout_s``."""
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
                    msg = (
                        f"{self.name}: no {prefix!r} line within {timeout_s:.0f} s; "
                        f"{self.log_tail()}"
                    )
                    raise BenchFailure(msg)
                if selector.select(min(left, 0.5)):
                    chunk = os.read(self.proc.stdout.fileno(), 65536)
                    if not chunk:
                        status = self.proc.wait(STOP_TIMEOUT_S)
                        msg = (
                            f"{self.name} exited with {status} before {prefix!r}; {self.log_tail()}"
                        )
                        raise BenchFailure(msg)
                    buffered += chunk

    def wait_until(
        self, ready: Callable[[], bool], what: str, timeout_s: float = START_TIMEOUT_S
    ) -> None:
        """Calls ``ready`` every 50 ms until it returns true; bounded by ``timeout_s``.

        Fails at once if the process exits; ``what`` says what was awaited
        (``answering``: "NAME not answering within N s").
        """
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                msg = f"{self.name} exited with {self.proc.returncode}; {self.log_tail()}"
                raise BenchFailure(msg)
            if ready():
                return
            if time.monotonic() > deadline:
                msg = f"{self.name} not {what} within {timeout_s:.0f} s; {self.log_tail()}"
                raise BenchFailure(msg)
            time.sleep(0.05)

    def log_tail(self, lines: int = 15) -> str:
        if not self._log.closed:
            self._log.flush()
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as file:
                tail = file.read().splitlines()[-lines:]
        except OSError:
            return "no log"
        return "log tail:\n  " + "\n  ".join(tail) if tail else "empty log"

    def stop(self) -> None:
        """Stops the process; stopping twice is harmless."""
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

    def __enter__(self) -> ChildProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class StoreServerProcess(ChildProcess):
    """``python -m connector.server`` on ``127.0.0.1:0`` in a temporary data directory.

    Started once it printed ``listening on HOST:PORT`` (then ``uri`` is known);
    :meth:`stop` also removes the data directory. ``where`` replaces
    ``--data-dir`` (``--storage jetstream --nats-url ...``).
    """

    def __init__(self, *extra_args: str, where: Sequence[str] | None = None):
        self._scratch = tempfile.TemporaryDirectory(prefix="tidemark-bench-")
        data_dir = os.path.join(self._scratch.name, "data")
        self.args = list(extra_args)
        location = list(where) if where is not None else ["--data-dir", data_dir]
        argv = [sys.executable, "-m", "connector.server", *location,
                "--listen", "127.0.0.1:0", *extra_args]  # fmt: skip
        try:
            super().__init__(argv, os.path.join(self._scratch.name, "server.log"), name="server")
        except BaseException:
            self._scratch.cleanup()
            raise
        try:
            address = self.wait_for_line("listening on").split()[-1]
        except BaseException:
            self.stop()
            raise
        self.uri = f"tidemark://{address}"

    def stop(self) -> None:
        """Stops the server and removes its data; stopping twice is harmless."""
        super().stop()
        with contextlib.suppress(OSError):
            self._scratch.cleanup()

    def __enter__(self) -> StoreServerProcess:
        return self


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


def positive(text: str) -> int:
    """An option's value as an int > 0 (an argparse ``type``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        msg = f"{text!r} is not a whole number > 0"
        raise argparse.ArgumentTypeError(msg)
    return value


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


# --- events the engine benchmarks share --------------------------------------------------

#: The size of each benchmark event, in bytes.
EVENT_BYTES = 100


def json_event(i: int, ts: int, key: str) -> str:
    """Event ``i`` as JSON of exactly :data:`EVENT_BYTES` bytes (padded).

    ``{"ts": ms, "key": "kN", "value": i, "pad": "xxx..."}``.
    """
    head = json.dumps({"ts": ts, "key": key, "value": i, "pad": ""}, separators=(",", ":"))
    pad = EVENT_BYTES - len(head)
    if pad < 0:
        msg = f"event {i} is {len(head)} bytes before padding, more than {EVENT_BYTES}"
        raise BenchFailure(msg)
    return head[:-2] + "x" * pad + '"}'


class _LineTime:
    """The event time of a JSON line: its ``ts`` (a writer's assigner for text events)."""

    def extract_timestamp(self, event: str, ingestion_time_ms: int) -> int:
        """``ts`` of the JSON text ``event``, epoch ms."""
        return int(json.loads(event)["ts"])


def write_store_and_files(
    uri: str,
    stream: str,
    *,
    events: int,
    keys: int,
    file_events: int,
    json_dir: str,
    closing_window_ms: int | None = None,
) -> list[int]:
    """Writes ``events`` events to a new 2-segment ``stream`` and, byte for byte, to files.

    The files are JSON lines of ``file_events`` events each in ``json_dir``
    (created). ``ts`` is the wall clock when the event is written; returns
    the events' ``ts`` in order; event ``i`` has key ``k{i % keys}``.

    With ``closing_window_ms`` the writer also asserts its event time from
    ``ts`` (``assert_watermarks_from``) after each file's events, and one
    last event (``events + 1`` in all) has the time half a window after the
    end of the window of that many ms holding the others' latest: a
    watermark that reaches it, the store's in the event-time domain or a
    file read's ``withWatermark`` with no delay, has closed every window of
    the others and not its own. That writer is flushed and left open: closing
    it would mark it idle, and a stream whose writers are all idle holds no
    event-time watermark at its tail (start the store with
    ``--writer-idle-timeout-ms 0``, or it times the writer out).
    """
    from connector import EventWriter, StoreClient, StringSerializer, WriterConfig

    scope, _, name = stream.partition("/")
    names = [f"k{n}" for n in range(keys)]
    times: list[int] = []
    os.makedirs(json_dir)
    window = closing_window_ms or 0
    asserting = window > 0
    config = WriterConfig(assert_watermarks_from=_LineTime()) if asserting else None
    with StoreClient(uri) as client:
        client.create_scope(scope)
        client.create_stream(scope, name, segment_count=2)
        writer = EventWriter(client, stream, StringSerializer(), config=config)
        file = None
        try:
            for i in range(events + asserting):
                if i % file_events == 0:
                    if file is not None:
                        file.close()
                        if asserting:
                            writer.flush()  # and asserts the event time written so far
                    path = os.path.join(json_dir, f"part-{i // file_events:06d}.json")
                    file = open(path, "w", encoding="utf-8")  # noqa: SIM115
                key = names[i % len(names)]
                ts = int(time.time() * 1000)
                if i == events:  # the closing event
                    ts = (max(times) // window + 1) * window + window // 2
                line = json_event(i, ts, key)
                writer.write_event(line, routing_key=key)
                file.write(line + "\n")
                times.append(ts)
            writer.flush()
        finally:
            if file is not None:
                file.close()
            if not asserting:
                writer.close()
    return times


def package_version(package: str) -> str:
    """The installed version of ``package``."""
    from importlib import metadata

    return metadata.version(package)


def java_version() -> str:
    """The first line of ``java -version``."""
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "Java unknown"
    first = (out.stderr or out.stdout).splitlines()[:1]
    return first[0].replace('"', "") if first else "Java unknown"
