"""Deleting an empty scope, and a state value (a reader group's), durably and across restarts."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest

from connector import StoreClient
from connector.errors import FailedPreconditionError, NotFoundError
from connector.store.file.catalog import Catalog
from connector.store.file.open_files import OpenFiles
from connector.store.records import StateDeleted, StateSet


def test_an_empty_scope_is_deleted_and_stays_deleted_after_kill_9(
    spawn_server: Callable[..., object], data_dir: pathlib.Path
) -> None:
    server = spawn_server(data_dir)
    with StoreClient(server.uri) as client:
        client.create_scope("gone")
        client.create_scope("kept")
        client.delete_scope("gone")
        assert client.list_scopes() == ["kept"]
        with pytest.raises(NotFoundError, match="'gone'"):
            client.delete_scope("gone")
        with pytest.raises(NotFoundError, match="'gone'"):
            client.create_stream("gone", "s", 1)
    server.process.kill()
    server.process.wait(timeout=10)

    restarted = spawn_server(data_dir)
    with StoreClient(restarted.uri) as client:
        assert client.list_scopes() == ["kept"]
        client.create_scope("gone")  # the name is free again
        assert client.list_scopes() == ["gone", "kept"]


def test_a_scope_with_streams_or_state_is_not_deleted_and_the_error_names_them(
    store_client: StoreClient,
) -> None:
    client = store_client
    client.create_scope("iot")
    client.create_stream("iot", "sensors", 1)
    client.seal_stream("iot", "sensors")
    with pytest.raises(FailedPreconditionError, match="stream iot/sensors"):
        client.delete_scope("iot")
    client.delete_stream("iot", "sensors")
    client.compare_and_set_state("readergroup/iot/g", 0, b"{}")
    with pytest.raises(FailedPreconditionError, match="state readergroup/iot/g"):
        client.delete_scope("iot")
    _, current = client.compare_and_set_state("readergroup/iot/g", 1, b"{}")
    assert client.delete_state("readergroup/iot/g", current.revision)[0]
    client.delete_scope("iot")
    assert client.list_scopes() == []


def test_a_deleted_value_is_gone_and_a_new_one_never_takes_its_revisions(
    store_client: StoreClient,
) -> None:
    client = store_client
    key = "readergroup/iot/g"
    assert client.delete_state(key, 0) == (False, client.get_state(key))  # nothing to delete
    client.compare_and_set_state(key, 0, b"one")
    client.compare_and_set_state(key, 1, b"two")
    deleted, current = client.delete_state(key, 1)  # a stale revision deletes nothing
    assert not deleted and current.value == b"two"
    deleted, current = client.delete_state(key, 2)
    assert deleted and current.revision == 0
    assert client.get_state(key).revision == 0
    assert client.list_state_keys("readergroup/") == []

    written, again = client.compare_and_set_state(key, 0, b"new")
    assert written and again.revision == 3
    for stale in (1, 2):  # a holder of the deleted value's revisions never matches the new one
        assert not client.compare_and_set_state(key, stale, b"stale")[0]
    assert client.get_state(key).value == b"new"


def test_a_compacted_journal_keeps_the_last_revision_of_a_deleted_value(
    tmp_path: pathlib.Path,
) -> None:
    catalog = Catalog(str(tmp_path), OpenFiles(4))
    for record in (
        StateSet("k/s/a", b"1", 1),
        StateSet("k/s/a", b"2", 2),
        StateDeleted("k/s/a", 2),
    ):
        catalog.apply(record)
    snapshot = catalog.snapshot()
    assert snapshot == [StateDeleted("k/s/a", 2)]
    restored = Catalog(str(tmp_path), OpenFiles(4))
    for record in snapshot:
        restored.apply(record)
    assert restored.state("k/s/a") == (b"", 0)
    assert restored.next_state_revision("k/s/a") == 3
    assert restored.state_keys("") == []
