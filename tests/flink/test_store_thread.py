"""Closing a source function ends its store call in flight at once, and the function emits nothing.

A cancelled job closes its functions while one may be inside a store call
that retries against a store that is gone (for up to a minute). Closing
closes the call's client at once, so the call ends then, raising
:class:`StoreThreadClosed`, which the function takes as "closing". Real
gRPC clients against a loopback port where nothing listens (they retry
for the whole budget); no Flink: the coordinator's keyed state is a plain
holder, as in ``test_flink_call_path``.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from connector import StoreClient
from connector.reader.source import SourcePlanner
from flink_adapter import FlinkTidemarkReader, TimeDomain
from flink_adapter.epoch_plans import EpochPlans
from flink_adapter.functions import EpochCoordinator
from flink_adapter.store_thread import StoreThread, StoreThreadClosed
from tests.flink.holders import Value
from tests.flink.rest import free_port

#: The retry budget of the clients here: a call in flight would last this long without a close.
_RETRY_BUDGET_S = 60.0
#: The most a call in flight may take to end once its thread is closed, s.
_ENDS_WITHIN_S = 10.0


def _unreachable_uri() -> str:
    return f"tidemark://127.0.0.1:{free_port()}"


def _running(name: str) -> bool:
    return any(t.name.startswith(name) for t in threading.enumerate())


def test_closing_a_store_thread_ends_its_call_in_flight_at_once(wait_until: Any) -> None:
    client = StoreClient(_unreachable_uri(), retry_timeout_s=_RETRY_BUDGET_S)
    store = StoreThread("test-store-in-flight")
    in_flight = threading.Event()
    outcome: list[BaseException] = []

    def call_the_store() -> None:
        in_flight.set()
        client.list_scopes()

    def caller() -> None:
        try:
            store.call(call_the_store)
        except BaseException as error:  # noqa: BLE001 - the test looks at what it was
            outcome.append(error)

    calling = threading.Thread(target=caller)
    calling.start()
    assert in_flight.wait(_ENDS_WITHIN_S)

    store.close(client)
    calling.join(_ENDS_WITHIN_S)

    assert not calling.is_alive(), "the call in flight outlived its closed thread"
    assert len(outcome) == 1
    assert isinstance(outcome[0], StoreThreadClosed), outcome
    with pytest.raises(StoreThreadClosed):
        store.call(print)  # a call after the close is refused the same way
    store.close(client)  # closing twice is harmless
    wait_until(lambda: not _running("test-store-in-flight"), timeout=_ENDS_WITHIN_S)


def test_a_coordinator_closed_while_planning_emits_nothing_and_raises_nothing(
    wait_until: Any,
) -> None:
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(_unreachable_uri())
        .for_stream("c/s")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_event_read_timeout(int(_RETRY_BUDGET_S * 1000))
        .build(check_store=False)
    )
    coordinator = EpochCoordinator(reader.settings)
    coordinator._store = StoreThread("test-coordinator-store")  # noqa: SLF001
    coordinator._planner = SourcePlanner(reader.settings.spec.client(), reader.settings.spec)  # noqa: SLF001
    coordinator._plans = EpochPlans(coordinator._store, coordinator._planner, 0)  # noqa: SLF001
    coordinator._frontier, coordinator._epoch = Value(), Value()  # noqa: SLF001
    coordinator._next_epoch_at = Value(1_000)  # noqa: SLF001
    emitted: list[Any] = []
    raised: list[BaseException] = []

    def timer_fires() -> None:
        try:
            emitted.extend(coordinator.on_timer(1_000, ctx=None))
        except BaseException as error:  # noqa: BLE001 - the test looks at what it was
            raised.append(error)

    firing = threading.Thread(target=timer_fires)
    firing.start()
    # The store thread starts with the timer's first call (the frontier's start), which
    # retries against nothing: it is in flight from then on.
    wait_until(lambda: _running("test-coordinator-store"), timeout=_ENDS_WITHIN_S)

    closing = threading.Thread(target=coordinator.close)
    closing.start()
    closing.join(_ENDS_WITHIN_S)
    firing.join(_ENDS_WITHIN_S)

    assert not closing.is_alive(), "close waited for the call in flight"
    assert not firing.is_alive(), "the timer's call outlived the close"
    assert raised == []
    assert emitted == []
    assert coordinator._frontier.value() is None  # noqa: SLF001 - nothing planned, nothing saved
    coordinator.close()  # closing twice is harmless
