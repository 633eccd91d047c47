"""A nemesis: seeded faults under writers, a reader group and compare-and-sets, on JetStream.

The deployment "Running on a cluster" describes, on loopback: three
nats-server nodes, each on a disk of its own (a tmpfs), and two Tidemark
server processes behind one address (:class:`FailoverProxy`, a TCP load
balancer). The work, all through that address: two :class:`EventWriter`
threads writing numbered events of six routing keys to a stream of two
segments (each flush acknowledged; their clients retry across an outage),
the readers of a reader group in the ingestion-time domain, and two threads
of compare-and-sets on one state value, a register (each value names the
value it replaced; their clients give up sooner, so some answers are
UNAVAILABLE).

The faults (:data:`KINDS`), one a cycle, in a seeded order with seeded
lengths (:func:`schedule`): the node leading the stream killed with SIGKILL
and started again; a Tidemark server killed with SIGKILL and another started
in its place; the leader paused (SIGSTOP) and resumed; a quorum lost (the
two other nodes killed, then started again); the leader's disk filled (its
JetStream shuts itself down), then emptied and the node restarted. A
quorum loss leaves the stream's leader alone or the register's (the state
bucket's), drawn. Each
cycle first waits until the writers, the readers and the register have all
moved on since the last fault (liveness, bounded), then strikes, holds the
fault, and heals it.

Afterwards :attr:`Outcome.problems` lists what broke a promise:

- every acknowledged event is stored once, each key's in the order written,
  and nothing else is stored;
- the readers read every one of them once, each key's in order, and each
  reader's watermarks rose strictly;
- the register's values form one chain from its first value, as long as its
  revision says; every value answered "written" is in it, and no value
  answered "not written" is; an answer is written, not written or
  UNAVAILABLE (unknown), never another error.

The short run is ``tests/faults/test_nemesis.py``; the long one is the
benchmark ``python -m bench.run nemesis --cycles N``.
"""

from __future__ import annotations

import contextlib
import pathlib
import random
import subprocess
import threading
import time
import traceback
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from connector import EventWriter, StoreClient, StreamManager
from connector.client import StringSerializer, WriterConfig
from connector.devtools.local_cluster import LocalCluster
from connector.errors import StoreUnavailableError, TidemarkError
from connector.framing import iter_frames
from connector.reader import ReaderConfig, ReaderGroupManager, TimeDomain
from connector.reader.group import ReaderGroup
from connector.store.jetstream.naming import state_bucket
from tests.conftest import wait_until
from tests.store.jetstream.disks import fill, node_disks
from tests.store.jetstream.failover_proxy import FailoverProxy

__all__ = ["KINDS", "Fault", "Outcome", "Start", "run_nemesis", "schedule"]

#: The faults, by name.
KINDS = ("leader_kill", "server_kill", "leader_pause", "quorum_loss", "leader_disk_full")
KEYS = [f"key-{n}" for n in range(6)]
SCOPE, STREAM, GROUP = "nemesis", "events", "g"
#: The register: a state value outside the reader groups' keys.
REGISTER = "nemesis/register"
FIRST_VALUE = "first"
#: Each node's disk: room for the run, little enough to fill at once.
DISK = "64m"
#: How long a cycle may wait for everything to move on after a fault (liveness, not speed).
RESUME_BOUND_S = 90.0
#: How long the writers' and readers' clients keep retrying an unreachable store.
PATIENT_S = 120.0
#: How long the register's clients retry (shorter than a fault: some answers are UNAVAILABLE).
HASTY_S = 3.0


@dataclass(frozen=True)
class Fault:
    """One cycle's fault: its kind (one of :data:`KINDS`) and how long it is held, s."""

    kind: str
    hold_s: float


def schedule(seed: int, cycles: int, longest_hold_s: float) -> list[Fault]:
    """``cycles`` faults drawn with ``seed``: every kind once in each run of len(KINDS) cycles.

    Holds are drawn between 1 s and ``longest_hold_s``.
    """
    rng = random.Random(seed)
    faults: list[Fault] = []
    while len(faults) < cycles:
        kinds = list(KINDS)
        rng.shuffle(kinds)
        faults += [Fault(kind, round(rng.uniform(1.0, longest_hold_s), 1)) for kind in kinds]
    return faults[:cycles]


@dataclass
class Struck:
    """A fault as it happened: the node (or server) it struck, and when the work came back.

    ``outage_s``: from the fault's start to the acknowledgement of the first
    flush begun after it (None: none was).
    """

    fault: Fault
    target: int
    started: float
    healed: float
    outage_s: float | None = None


@dataclass
class Outcome:
    """What a nemesis run did and found.

    ``lost``: acknowledged events the store does not hold; ``duplicated``:
    events it holds more than once; ``contradicted``: compare-and-set
    answers the register's history belies; ``answers``: how many of each
    (written, not written, unknown); ``problems``: every promise broken, in words.
    """

    struck: list[Struck]
    acknowledged: int
    stored: int
    read: int
    lost: int
    duplicated: int
    answers: dict[str, int]
    contradicted: int
    seconds: float
    problems: list[str]


# --- the work ----------------------------------------------------------------------


@dataclass
class _Writer:
    name: str
    acked: list[str] = field(default_factory=list)
    #: (begun, acknowledged) of each flush, monotonic seconds.
    flushes: list[tuple[float, float]] = field(default_factory=list)
    error: str = ""


@dataclass
class _Reader:
    name: str
    events: list[str] = field(default_factory=list)
    watermarks: list[int] = field(default_factory=list)
    error: str = ""


@dataclass
class _Register:
    """One thread's compare-and-sets: each value's predecessor, and what each was answered."""

    name: str
    replaced: dict[str, str] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)


def _write(uri: str, writer: _Writer, stop: threading.Event) -> None:
    numbers = dict.fromkeys(KEYS, 0)
    try:
        with StoreClient(uri, retry_timeout_s=PATIENT_S) as client:
            config = WriterConfig(max_batch_events=1_000)
            out = EventWriter(client, f"{SCOPE}/{STREAM}", StringSerializer(), writer.name, config)
            while not stop.is_set():
                batch = []
                for key in KEYS:
                    batch.append(f"{writer.name}|{key}|{numbers[key]}")
                    numbers[key] += 1
                    out.write_event(batch[-1], routing_key=key)
                begun = time.monotonic()
                out.flush()  # retried by the client across an outage; raises if it gives up
                writer.acked += batch
                writer.flushes.append((begun, time.monotonic()))
                stop.wait(0.02)  # the writers' pace
            out.close()
    except BaseException:  # noqa: BLE001 - a problem the run reports
        writer.error = traceback.format_exc()


def _read(uri: str, reader: _Reader, stop: threading.Event) -> None:
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)
    try:
        with StoreClient(uri, retry_timeout_s=PATIENT_S) as client:
            group = ReaderGroup(client, SCOPE, GROUP)
            with group.create_reader(reader.name, StringSerializer(), config) as source:
                while not stop.is_set():
                    read = source.read_next_event(timeout_ms=200)
                    if read is None:
                        continue
                    if read.is_watermark:
                        reader.watermarks.append(read.watermark)
                    else:
                        reader.events.append(read.event)
    except BaseException:  # noqa: BLE001 - a problem the run reports
        reader.error = traceback.format_exc()


def _set_register(uri: str, register: _Register, stop: threading.Event) -> None:
    """Compare-and-sets on :data:`REGISTER` until ``stop``, each naming the value it replaces."""
    with StoreClient(uri, retry_timeout_s=HASTY_S, call_timeout_s=30.0) as client:
        number = 0
        while not stop.is_set():
            try:
                current = client.get_state(REGISTER)
            except StoreUnavailableError:
                stop.wait(0.2)
                continue
            except TidemarkError as error:
                register.wrong.append(f"get_state: {error!r}")
                stop.wait(0.2)
                continue
            value = f"{register.name}-{number}"
            number += 1
            register.replaced[value] = current.value.decode().split("<-")[0]
            try:
                written, _ = client.compare_and_set_state(
                    REGISTER, current.revision, f"{value}<-{register.replaced[value]}".encode()
                )
                register.answers[value] = "written" if written else "not written"
            except StoreUnavailableError:
                register.answers[value] = "unknown"
            except TidemarkError as error:
                register.answers[value] = "unknown"
                register.wrong.append(f"compare-and-set {value}: {error!r}")
            stop.wait(0.05)  # the register's pace


# --- the deployment ------------------------------------------------------------------


#: Starts ``python -m connector.server`` with the arguments given (where its store is, and
#: how it ticks); returns its process and the HOST:PORT it listens on.
Start = Callable[[list[str]], tuple[subprocess.Popen[bytes], str]]


class _Deployment:
    """The cluster, its disks, the two servers and the proxy in front of them; set up for the work.

    The servers share a namespace of the run's own and tick idle segments
    every 100 ms after 500 ms (so readers' watermarks move). The stream, the
    reader group and the register's first value are made here.
    """

    def __init__(self, cluster: LocalCluster, disks: list[pathlib.Path], start: Start):
        self.cluster = cluster
        self.disks = disks
        namespace = f"nm{uuid.uuid4().hex[:8]}"
        self._args = ["--storage", "jetstream", "--nats-url", ",".join(cluster.urls)]
        self._args += ["--nats-namespace", namespace, "--max-watermark-lag-ms", "500"]
        self._args += ["--polling-period-ms", "100"]
        self._start = start
        self.servers = [start(self._args) for _ in range(2)]
        self.proxy = FailoverProxy([address for _, address in self.servers])
        with StoreClient(self.proxy.uri, retry_timeout_s=30.0) as client:
            StreamManager(client).create_scope(SCOPE)
            client.create_stream(SCOPE, STREAM, 2)
            ReaderGroupManager(client).create_reader_group(SCOPE, GROUP, [f"{SCOPE}/{STREAM}"])
            client.compare_and_set_state(REGISTER, 0, FIRST_VALUE.encode())
        [self.stream] = cluster.stream_names(f"{namespace}_")
        self.states = f"KV_{state_bucket(namespace)}"

    def leader(self, stream: str) -> int:
        """The node leading JetStream stream ``stream`` now (waits for one, bounded)."""
        found = wait_until(
            lambda: [n for n in [self.cluster.stream_leader(stream)] if n is not None],
            timeout=RESUME_BOUND_S,
            what=f"the leader of {stream}",
        )
        return found[0]

    def strike(self, fault: Fault, rng: random.Random) -> Struck:
        """Strikes ``fault``, holds it (a fault's length: no condition to wait for), heals it."""
        if fault.kind == "server_kill":
            return self._kill_server(fault, rng.randrange(len(self.servers)))
        leader = self.leader(self.stream)
        if fault.kind == "quorum_loss":  # the stream's or the register's leader left alone
            leader = rng.choice([leader, self.leader(self.states)])
        others = [node for node in range(3) if node != leader]
        started = time.monotonic()
        if fault.kind == "leader_kill":
            self.cluster.kill_node(leader)
            time.sleep(fault.hold_s)
            self.cluster.start_node(leader)
        elif fault.kind == "leader_pause":
            self.cluster.pause_node(leader)
            time.sleep(fault.hold_s)
            self.cluster.resume_node(leader)
        elif fault.kind == "quorum_loss":
            for node in others:
                self.cluster.kill_node(node)
            time.sleep(fault.hold_s)
            for node in others:
                self.cluster.start_node(node)
        elif fault.kind == "leader_disk_full":
            ballast = fill(self.disks[leader])
            time.sleep(fault.hold_s)
            ballast.unlink()
            self.cluster.stop_node(leader)  # its JetStream shut itself down: a restart
            self.cluster.start_node(leader)
        else:
            msg = f"no fault {fault.kind!r}; there are {', '.join(KINDS)}"
            raise ValueError(msg)
        return Struck(fault, leader, started, time.monotonic())

    def _kill_server(self, fault: Fault, victim: int) -> Struck:
        started = time.monotonic()
        process, _ = self.servers[victim]
        process.kill()
        process.wait(timeout=30)
        time.sleep(fault.hold_s)  # the other server serves alone meanwhile
        self.servers[victim] = self._start(self._args)
        self.proxy.backends[victim] = self.servers[victim][1]
        return Struck(fault, victim, started, time.monotonic())

    def close(self) -> None:
        """Closes the proxy and kills the servers still running."""
        self.proxy.close()
        for process, _ in self.servers:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


@contextlib.contextmanager
def _deployment(directory: str, start: Start) -> Iterator[_Deployment]:
    cluster = LocalCluster(directory)
    with node_disks(cluster, [DISK] * 3) as disks, cluster:
        deployment = _Deployment(cluster, disks, start)
        try:
            yield deployment
        finally:
            deployment.close()


# --- the run -----------------------------------------------------------------------


def run_nemesis(
    directory: str,
    start: Start,
    faults: list[Fault],
    seed: int,
    readers: int = 1,
) -> Outcome:
    """Runs ``faults`` one a cycle under the work, then checks everything (see the module).

    ``directory`` holds the cluster; ``start`` starts a Tidemark server.
    """
    rng = random.Random(seed)
    began = time.monotonic()
    with _deployment(directory, start) as deployment:
        uri = deployment.proxy.uri
        stop_writing, stop_reading, stop_setting = (threading.Event() for _ in range(3))
        writers = [_Writer(f"writer-{n}") for n in range(2)]
        group = [_Reader(f"reader-{n}") for n in range(readers)]
        registers = [_Register(f"r{n}") for n in range(2)]
        threads = [threading.Thread(target=_write, args=(uri, w, stop_writing)) for w in writers]
        threads += [threading.Thread(target=_read, args=(uri, r, stop_reading)) for r in group]
        threads += [
            threading.Thread(target=_set_register, args=(uri, r, stop_setting)) for r in registers
        ]
        for thread in threads:
            thread.start()
        struck: list[Struck] = []
        try:
            for fault in faults:
                _wait_for_progress(writers, group, registers)
                struck.append(deployment.strike(fault, rng))
            _wait_for_progress(writers, group, registers)
            stop_writing.set()
            stop_setting.set()
            for thread in threads[: len(writers)]:
                thread.join(timeout=PATIENT_S)
            acked = {event for w in writers for event in w.acked}
            with contextlib.suppress(AssertionError):  # a reader behind is reported below
                wait_until(
                    lambda: (
                        acked <= {e for r in group for e in r.events} or _failed(writers, group)
                    ),
                    timeout=RESUME_BOUND_S,
                    what="the readers to read every acknowledged event",
                )
        finally:
            for stop in (stop_writing, stop_reading, stop_setting):
                stop.set()
            for thread in threads:
                thread.join(timeout=PATIENT_S)
        with StoreClient(uri, retry_timeout_s=PATIENT_S) as client:
            stored = _stored(client)
            final = client.get_state(REGISTER)
    for hit in struck:
        hit.outage_s = _outage(writers, hit.started)
    answers: dict[str, int] = defaultdict(int)
    for register in registers:
        for answer in register.answers.values():
            answers[answer] += 1
    contradicted, register_problems = _register_check(
        registers, final.value.decode(), final.revision
    )
    acked = [event for w in writers for event in w.acked]
    return Outcome(
        struck,
        len(acked),
        len(stored),
        sum(len(r.events) for r in group),
        len(set(acked) - set(stored)),
        len(stored) - len(set(stored)),
        dict(answers),
        len(contradicted),
        time.monotonic() - began,
        _event_problems(writers, group, stored) + register_problems,
    )


def _failed(writers: list[_Writer], readers: list[_Reader]) -> bool:
    return any(w.error for w in writers) or any(r.error for r in readers)


def _wait_for_progress(
    writers: list[_Writer], readers: list[_Reader], registers: list[_Register]
) -> None:
    """Waits until every writer flushed, every reader read and the register was answered anew."""
    flushed = [len(w.flushes) for w in writers]
    read = [len(r.events) for r in readers]
    answered = sum(len(r.answers) for r in registers)

    def moved_on() -> bool:
        if _failed(writers, readers):
            return True  # reported at the end
        return (
            all(len(w.flushes) > n for w, n in zip(writers, flushed, strict=True))
            and all(len(r.events) > n for r, n in zip(readers, read, strict=True))
            and sum(len(r.answers) for r in registers) > answered
        )

    wait_until(moved_on, timeout=RESUME_BOUND_S, interval=0.05, what="writes, reads and answers")


def _outage(writers: list[_Writer], started: float) -> float | None:
    """From ``started`` to the acknowledgement of the first flush begun after it."""
    acks = [acked for w in writers for begun, acked in w.flushes if begun >= started]
    return min(acks) - started if acks else None


def _stored(client: StoreClient) -> list[str]:
    """Every event of the stream, segment by segment."""
    events = []
    for segment in client.describe_stream(SCOPE, STREAM).segments:
        offset = 0
        while True:
            read = client.read(segment.segment, offset, 1 << 20)
            if read.next_offset == offset:
                break
            events += [f.payload.decode() for f in iter_frames(read.data, read.offset)]
            offset = read.next_offset
    return events


def _by_key(events: list[str]) -> dict[tuple[str, str], list[int]]:
    """(writer, key) -> the numbers of its events, in the order given."""
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    for event in events:
        writer, key, number = event.split("|")
        found[writer, key].append(int(number))
    return found


def _event_problems(writers: list[_Writer], readers: list[_Reader], stored: list[str]) -> list[str]:
    problems = [f"{w.name} failed: {w.error}" for w in writers if w.error]
    problems += [f"{r.name} failed: {r.error}" for r in readers if r.error]
    written = _by_key([event for w in writers for event in w.acked])
    if _by_key(stored) != written:
        lost = {e for w in writers for e in w.acked} - set(stored)
        problems.append(
            f"the store holds {len(stored)} events ({len(set(stored))} distinct) for "
            f"{sum(len(n) for n in written.values())} acknowledged; lost: {sorted(lost)[:5]}"
        )
    seen = [event for r in readers for event in r.events]
    if len(seen) != len(set(seen)):
        problems.append(f"{len(seen) - len(set(seen))} events read twice")
    for (writer, key), numbers in _by_key(seen).items():
        if numbers != sorted(numbers):
            problems.append(f"{writer}'s {key} read out of order")
    unread = {e for w in writers for e in w.acked} - set(seen)
    if unread:
        problems.append(f"{len(unread)} acknowledged events never read: {sorted(unread)[:5]}")
    for reader in readers:
        marks = reader.watermarks
        if any(a >= b for a, b in zip(marks, marks[1:], strict=False)):
            problems.append(f"{reader.name}'s watermarks did not rise strictly")
    return problems


def _register_check(
    registers: list[_Register], final: str, revision: int
) -> tuple[list[str], list[str]]:
    """The answers the register's history belies, and every problem found in it (see module)."""
    replaced = {value: old for r in registers for value, old in r.replaced.items()}
    answers = {value: said for r in registers for value, said in r.answers.items()}
    problems = [wrong for r in registers for wrong in r.wrong]
    chain, value = [], final.split("<-")[0]
    while value != FIRST_VALUE and value in replaced and len(chain) <= len(replaced):
        chain.append(value)
        value = replaced[value]
    if value != FIRST_VALUE:
        problems.append(f"the register's history ends at {value!r}, not at its first value")
    if len(chain) != revision - 1:
        problems.append(f"the register is at revision {revision} after {len(chain)} writes")
    written = set(chain)
    contradicted = sorted(
        value
        for value, said in answers.items()
        if said != "unknown" and (said == "written") != (value in written)
    )
    problems += [
        f"{value} was answered {answers[value]}, but the register's history says otherwise"
        for value in contradicted
    ]
    return contradicted, problems
