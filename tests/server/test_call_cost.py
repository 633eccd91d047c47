"""What a small call costs the server: what it has in memory is answered on its event loop.

An idle reader's calls (``GetState`` answered ``unchanged``, a fetch
session's call with nothing new) take no trip to a pool thread and back,
which cost more than the answers; a call that must wait (the file store's
catalog busy with another thread) still waits on a pool thread, never on
the loop. Counted on a real server over gRPC (its pools' submissions), not
timed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from connector.client import StoreClient
from connector.client.fetch_session import FetchSession
from connector.clock import ManualClock
from connector.server import StoreServer
from tests.conftest import new_stream_in, wait_until

KEY = "readergroup/s/g"


@pytest.fixture
def trips(store_server: StoreServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the store calls the server sends to its pools from now on."""
    sent: list[str] = []
    for pool in (store_server._reads, store_server._changes):  # noqa: SLF001
        submit = pool.submit

        def counting(work: Any, *args: Any, submit: Any = submit, **kwargs: Any) -> Future[Any]:
            sent.append(getattr(getattr(work, "func", work), "__name__", repr(work)))
            return submit(work, *args, **kwargs)

        monkeypatch.setattr(pool, "submit", counting)
    return sent


@pytest.fixture
def session(store_client: StoreClient) -> Iterator[tuple[FetchSession, list[str]]]:
    """A fetch session over an idle stream of 4 segments, told their watermarks once."""
    stream = new_stream_in(store_client, 4)
    names = [s.segment for s in store_client.describe_stream(*stream.split("/")).segments]
    with FetchSession(store_client) as fetching:
        for name in names:
            fetching.add(name, 0)
        assert len(fetching.fetch(0).reads) == len(names)  # every watermark, told once
        yield fetching, names


@pytest.mark.storages("file")
def test_an_idle_readers_calls_take_no_trip_to_a_pool_thread(
    store_client: StoreClient,
    session: tuple[FetchSession, list[str]],
    trips: list[str],
    clock: ManualClock,
) -> None:
    fetching, names = session
    _, stored = store_client.compare_and_set_state(KEY, 0, b"record")
    trips.clear()
    for wait_ms in (0, 5, 0, 5):  # answered at once, and after a parked wait
        assert store_client.get_state(KEY, stored.revision).unchanged
        assert not fetching.fetch(wait_ms).reads
    assert trips == []

    clock.advance(1)  # a change is still read, on a pool thread
    store_client.append(names[2], "w", 0, [json.dumps("news").encode()])
    reads = fetching.fetch(5_000).reads
    assert [r.segment for r in reads] == [names[2]]
    assert "collect" in trips


@pytest.mark.storages("file")
def test_a_get_state_while_the_catalog_is_busy_waits_on_a_pool_thread_not_on_the_loop(
    store_server: StoreServer,
    store_client: StoreClient,
    session: tuple[FetchSession, list[str]],
    trips: list[str],
) -> None:
    fetching, _ = session
    _, stored = store_client.compare_and_set_state(KEY, 0, b"record")
    catalog_lock = store_server.store.engine._catalog._lock  # type: ignore[attr-defined]  # noqa: SLF001
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with catalog_lock:
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    with ThreadPoolExecutor(1) as asking:
        try:
            holding.wait(5)
            answer = asking.submit(store_client.get_state, KEY, stored.revision)
            wait_until(lambda: "get_state" in trips, what="the GetState to go to a pool thread")
            assert not fetching.fetch(5).reads  # the loop answers meanwhile
            assert not answer.done()
        finally:
            release.set()
            holder.join()
        assert answer.result(timeout=10).unchanged
