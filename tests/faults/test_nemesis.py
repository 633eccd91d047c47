"""A seeded nemesis on JetStream: each kind of fault once, under writers, a reader and a register.

One cycle of each fault of :mod:`tests.faults.nemesis` (the stream leader
killed, a Tidemark server killed, the leader paused, a quorum lost, the
leader's disk full), in a seeded order with holds of 1 to 3 s, on three
nats-server nodes and two Tidemark servers behind one address. Afterwards
nothing acknowledged is lost, duplicated or out of order, in the store or
as read, and every compare-and-set answer holds against the register's
history. The long run, any number of cycles: ``python -m bench.run nemesis``.
"""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Callable

import pytest

from tests.conftest import ServerProcess
from tests.faults.nemesis import KINDS, run_nemesis, schedule

pytestmark = [pytest.mark.slow, pytest.mark.storages("jetstream")]

SEED = 20261128
LONGEST_HOLD_S = 3.0


def test_a_seeded_nemesis_loses_nothing_acknowledged_and_every_answer_holds(
    tmp_path: pathlib.Path, spawn_server: Callable[..., ServerProcess]
) -> None:
    def start(args: list[str]) -> tuple[subprocess.Popen[bytes], str]:
        server = spawn_server(None, *args)
        return server.process, server.address

    faults = schedule(SEED, len(KINDS), LONGEST_HOLD_S)
    outcome = run_nemesis(str(tmp_path / "cluster"), start, faults, SEED)

    print(
        f"{len(outcome.struck)} faults in {outcome.seconds:.1f} s: "
        + ", ".join(
            f"{s.fault.kind} {s.fault.hold_s} s (outage {s.outage_s})" for s in outcome.struck
        )
        + f"; {outcome.acknowledged} events acknowledged, {outcome.read} read; "
        + f"register answers {outcome.answers}"
    )
    assert outcome.problems == []
    assert sorted(s.fault.kind for s in outcome.struck) == sorted(KINDS)
    assert outcome.stored == outcome.acknowledged > 0
    assert outcome.answers.get("written", 0) > 0, "the register was never written"
