"""Nemesis benchmark: seeded faults on JetStream under writers, a reader group and compare-and-sets.

    python -m bench.run nemesis                          # 20 cycles, holds up to 12 s
    python -m bench.run nemesis --cycles 5 --longest-hold-s 3 --no-write

The long run of ``tests/faults/test_nemesis.py`` (see
:mod:`tests.faults.nemesis`): three nats-server nodes on disks of their own
(tmpfs: needs root), two Tidemark server processes behind one TCP load
balancer, two writers, a reader group and two threads of compare-and-sets
on one register. ``--cycles`` faults, every kind once in each run of five
in a seeded order (the stream leader killed, a Tidemark server killed, the
leader paused, a quorum lost, the leader's disk full), each held 1 s to
``--longest-hold-s``. The figures are what was acknowledged, stored, read
and answered, what broke a promise, and each fault's write outage: from the
fault to the acknowledgement of the first flush begun after it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from dataclasses import dataclass

import grpc

from bench._support import StoreServerProcess, package_version
from bench.figures import Target
from tests.faults.nemesis import KINDS, Outcome, run_nemesis, schedule

__all__ = ["Cycle", "NemesisFigures", "measure", "options"]

#: Liveness: the work must be back this soon after any fault began.
TARGET_OUTAGE_S = 30.0


@dataclass(frozen=True)
class Cycle:
    """One fault: its kind, the node (or server) struck, how long it held, the write outage, s.

    ``outage_s`` is NaN when no flush began after the fault (the run ended).
    """

    kind: str
    target: int
    hold_s: float
    outage_s: float


@dataclass(frozen=True)
class NemesisFigures:
    """The run's settings, its faults, and what the work did and found."""

    seed: int
    longest_hold_s: float
    readers: int
    cycles: list[Cycle]
    acknowledged: int
    stored: int
    read: int
    lost: int
    duplicated: int
    answers: dict[str, int]
    contradicted: int
    seconds: float
    problems: list[str]
    software: tuple[str, ...]

    @property
    def cycle_count(self) -> int:
        """How many faults struck."""
        return len(self.cycles)

    @property
    def kinds(self) -> str:
        """The kinds of fault, in words."""
        return ", ".join(KINDS)

    @property
    def outages(self) -> dict[str, float]:
        """The median and the longest write outage, s, by kind of fault."""
        found: dict[str, float] = {}
        for kind in KINDS:
            times = [c.outage_s for c in self.cycles if c.kind == kind and c.outage_s >= 0]
            if times:
                found[f"{kind} median"] = statistics.median(times)
                found[f"{kind} max"] = max(times)
        return found

    @property
    def written(self) -> int:
        """Compare-and-sets answered written."""
        return self.answers.get("written", 0)

    @property
    def refused(self) -> int:
        """Compare-and-sets answered not written."""
        return self.answers.get("not written", 0)

    @property
    def unknown(self) -> int:
        """Compare-and-sets answered UNAVAILABLE (outcome unknown to the caller)."""
        return self.answers.get("unknown", 0)

    @property
    def targets(self) -> dict[str, Target]:
        """Nothing broken, and the work back within the liveness bound after every fault."""
        longest = max((c.outage_s for c in self.cycles if c.outage_s >= 0), default=None)
        return {
            "problems": Target(len(self.problems), "<=", 0),
            "outage": Target(longest, "<=", TARGET_OUTAGE_S, "s"),
        }


def _figures(args: argparse.Namespace, outcome: Outcome) -> NemesisFigures:
    cycles = [
        Cycle(
            s.fault.kind,
            s.target,
            s.fault.hold_s,
            float("nan") if s.outage_s is None else s.outage_s,
        )
        for s in outcome.struck
    ]
    software = (f"grpcio {grpc.__version__}", f"nats-py {package_version('nats-py')}")
    return NemesisFigures(
        args.seed,
        args.longest_hold_s,
        args.readers,
        cycles,
        outcome.acknowledged,
        outcome.stored,
        outcome.read,
        outcome.lost,
        outcome.duplicated,
        outcome.answers,
        outcome.contradicted,
        outcome.seconds,
        outcome.problems,
        software,
    )


def measure(args: argparse.Namespace) -> NemesisFigures:
    """``--cycles`` faults under the work; every server started is stopped after."""
    servers: list[StoreServerProcess] = []

    def start(where: list[str]) -> tuple[subprocess.Popen[bytes], str]:
        servers.append(StoreServerProcess(where=where))
        return servers[-1].proc, servers[-1].uri.removeprefix("tidemark://")

    faults = schedule(args.seed, args.cycles, args.longest_hold_s)
    try:
        with tempfile.TemporaryDirectory(prefix="nemesis-bench-") as scratch:
            outcome = run_nemesis(
                os.path.join(scratch, "cluster"),
                start,
                faults,
                args.seed,
                readers=args.readers,
            )
    finally:
        for server in servers:
            server.stop()
    for problem in outcome.problems:
        print(f"  problem: {problem}", flush=True)
    return _figures(args, outcome)


def options() -> argparse.ArgumentParser:
    """The benchmark's own options (the runner adds ``--no-write`` and ``--results``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=20, help="faults, one a cycle")
    parser.add_argument("--longest-hold-s", type=float, default=12.0, help="a fault's longest")
    parser.add_argument("--readers", type=int, default=2, help="readers in the group")
    parser.add_argument("--seed", type=int, default=20261128)
    return parser
