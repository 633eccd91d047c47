"""Change notification, written once: every change of a segment is noted and told, on both storages.

Pure tests of the record of a stream's changes, then a store of each
storage: every kind of change (an append, an idle tick, an assertion, a
seal, a truncation, a segment's creation) raises its stream's version and
reaches a segment's listener; what changed after a version costs what
changed; a stream created again is another incarnation.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from connector.clock import ManualClock
from connector.errors import NotFoundError
from connector.server import StoreServer
from connector.store.changes import Listeners, StreamChanges
from connector.store.front import StoreFront


def test_since_gives_the_segments_changed_after_a_version_in_the_order_of_their_last_change():
    changes: StreamChanges[str] = StreamChanges()
    for number in range(5):
        changes.note(number, f"s{number}")
    assert changes.since(0) == (5, ["s0", "s1", "s2", "s3", "s4"])
    changes.note(1, "s1")
    changes.note(3, "s3")
    assert changes.since(5) == (7, ["s1", "s3"])
    assert changes.since(6) == (7, ["s3"])
    assert changes.since(7) == (7, [])
    assert changes.incarnation != StreamChanges().incarnation != 0


def test_a_listener_is_told_of_every_change_until_it_stops_and_a_failing_one_stops_nobody():
    listeners = Listeners()
    heard: list[str] = []

    def failing() -> None:
        msg = "a listener's bug"
        raise RuntimeError(msg)

    stop = listeners.add(lambda: heard.append("a"))
    listeners.add(failing)
    listeners.add(lambda: heard.append("b"))
    listeners.notify()
    stop()
    stop()  # harmless twice
    listeners.notify()
    assert heard == ["a", "b", "b"]
    assert len(listeners) == 2


def _front(server: StoreServer) -> StoreFront:
    store = server.store
    assert isinstance(store, StoreFront)
    return store


@pytest.mark.storages("file", "jetstream")
def test_every_kind_of_change_raises_the_version_and_reaches_the_segments_listener(
    start_store: Callable[..., StoreServer], clock: ManualClock, storage: str
):
    store = _front(start_store())
    store.create_scope("ch")
    store.create_stream("ch", "st", 3)
    first = store.describe_tails("ch", "st")
    assert first.complete
    assert [t.segment for t in first.segments] == [f"ch/st/{n}" for n in range(3)]
    assert first.version == 3  # each segment's creation is a change
    heard: list[int] = []
    followed = store.follow("ch/st/1", 0, None, lambda: heard.append(1))

    def changed_since(version: int) -> list[str]:
        tails = store.describe_tails("ch", "st", first.incarnation, version)
        assert not tails.complete
        return [t.segment for t in tails.segments]

    version = first.version
    steps: list[tuple[str, Callable[[], object], list[str]]] = [
        ("an append", lambda: store.append("ch/st/1", "w", 0, [b"e0", b"e1"]), ["ch/st/1"]),
        (
            "an assertion",
            lambda: store.assert_watermark("ch", "st", "w", 0, clock.now_ms()),
            ["ch/st/0", "ch/st/1", "ch/st/2"],
        ),
        ("an idle tick", lambda: (clock.advance(20_000), store.advance_idle_segments()), None),
        ("a scale", lambda: store.scale_stream("ch", "st", [1], 2), None),
        ("a truncation", lambda: store.truncate_stream("ch", "st", {0: 0, 3: 0}), None),
    ]
    for what, change, expected in steps:
        before = len(heard)
        change()
        changed = changed_since(version)
        assert changed, f"{what} changed nothing"
        if expected is not None:
            assert sorted(changed) == expected, what
        if "ch/st/1" in changed:
            assert len(heard) > before, f"{what} of ch/st/1 was not heard"
        version = store.describe_tails("ch", "st", first.incarnation, version).version
    assert {"ch/st/3", "ch/st/4"} <= set(changed_since(first.version))  # the scale's successors
    sealed = {t.segment: t for t in store.describe_tails("ch", "st").segments}["ch/st/1"]
    assert sealed.sealed and sealed.successors == ("ch/st/3", "ch/st/4")
    assert changed_since(version) == []
    followed.close()


@pytest.mark.storages("file", "jetstream")
def test_a_stream_created_again_is_another_incarnation_and_its_old_segments_are_gone(
    start_store: Callable[..., StoreServer], storage: str, wait_until
):
    store = _front(start_store())
    store.create_scope("ag")
    store.create_stream("ag", "st", 2)
    old = store.describe_tails("ag", "st")
    heard: list[int] = []
    followed = store.follow("ag/st/0", 0, None, lambda: heard.append(1))
    woken: list[int] = []
    store.listen_stream("ag", "st", lambda: woken.append(1))
    store.seal_stream("ag", "st")
    store.delete_stream("ag", "st")
    wait_until(lambda: woken and heard, what="the deletion told to the listeners")
    with pytest.raises(NotFoundError):
        store.describe_tails("ag", "st", old.incarnation, old.version)
    with pytest.raises(NotFoundError, match="no longer exists"):
        followed.read(0, 100, None)
    store.create_stream("ag", "st", 1)
    new = store.describe_tails("ag", "st", old.incarnation, old.version)
    assert new.incarnation != old.incarnation and new.complete
    assert [t.segment for t in new.segments] == ["ag/st/0"]
    with pytest.raises(NotFoundError):  # bound to the deleted segment, not the new one
        followed.read(0, 100, None)
