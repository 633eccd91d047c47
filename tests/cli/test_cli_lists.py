"""``scope list``, ``stream list`` and ``readergroup list``; and the CLI against TLS and tokens."""

from __future__ import annotations

import pathlib
from typing import Any

from connector import StoreClient, StreamManager
from connector.reader.group import ReaderGroupManager
from connector.server import StoreServer
from tests.cli import ok_json, one_line, run
from tests.security.pki import secure_store


def test_scopes_streams_and_reader_groups_are_listed(store_server: StoreServer) -> None:
    uri = store_server.uri
    assert ok_json(uri, "scope", "list") == {"scopes": []}
    with StoreClient(uri) as client:
        manager = StreamManager(client)
        for scope in ("iot", "billing"):
            manager.create_scope(scope)
        manager.create_stream("iot", "sensors", 2)
        manager.create_stream("iot", "alerts", 1)
        manager.create_stream("billing", "invoices", 1)
        manager.seal_stream("iot", "alerts")
        groups = ReaderGroupManager(client)
        groups.create_reader_group("iot", "dashboard", ["iot/sensors"])
        groups.create_reader_group("iot", "archive", ["iot/sensors", "iot/alerts"])
        groups.create_reader_group("billing", "other", ["billing/invoices"])

    assert ok_json(uri, "scope", "list") == {"scopes": ["billing", "iot"]}
    assert run(uri, "scope", "list").output == "billing\niot\n"
    listed = ok_json(uri, "stream", "list", "iot")
    assert listed == {"scope": "iot", "streams": ["alerts", "sensors"]}  # sealed ones too
    assert run(uri, "stream", "list", "iot").output == "iot/alerts\niot/sensors\n"
    assert ok_json(uri, "readergroup", "list", "billing")["readergroups"] == ["other"]
    with StoreClient(uri) as client:
        StreamManager(client).create_scope("empty")
    assert ok_json(uri, "stream", "list", "empty") == {"scope": "empty", "streams": []}
    assert ok_json(uri, "readergroup", "list", "empty") == {"scope": "empty", "readergroups": []}
    groups_listed = ok_json(uri, "readergroup", "list", "iot")
    assert groups_listed == {"scope": "iot", "readergroups": ["archive", "dashboard"]}
    assert run(uri, "readergroup", "list", "iot").output == "iot/archive\niot/dashboard\n"


def test_listing_a_missing_or_malformed_scope_is_one_line_with_its_exit_code(
    store_server: StoreServer,
) -> None:
    for command in ("stream", "readergroup"):
        missing = run(store_server.uri, command, "list", "nope")
        assert missing.exit_code == 3
        assert one_line(missing) == "tidemarkctl: error: scope 'nope' does not exist"
    malformed = run(store_server.uri, "stream", "list", "no/slash")
    assert malformed.exit_code == 2
    assert "no/slash" in one_line(malformed)


def test_the_cli_against_tls_and_tokens_lists_only_what_the_token_may_read(
    tmp_path: pathlib.Path, clock: Any
) -> None:
    grants = {"admin": {"*": ["read", "write", "manage"]}, "reader": {"iot": ["read"]}}
    with secure_store(tmp_path, clock, grants) as store:
        base = store.server.uri
        ca = f"tls_ca_file={store.ca_file}"
        admin = f"{base}?{ca}&token_file={store.token_files['admin']}"
        reader = f"{base}?{ca}&token_file={store.token_files['reader']}"
        assert run(admin, "scope", "create", "iot").exit_code == 0
        assert run(admin, "stream", "create", "iot/s").exit_code == 0

        assert ok_json(reader, "stream", "list", "iot") == {"scope": "iot", "streams": ["s"]}
        assert ok_json(admin, "scope", "list") == {"scopes": ["iot"]}
        denied = run(reader, "scope", "list")  # every scope's names: needs read on '*'
        assert denied.exit_code == 7
        assert one_line(denied).startswith("tidemarkctl: error: ")
        assert "secret" not in denied.output
        no_token = run(f"{base}?{ca}", "stream", "list", "iot")
        assert no_token.exit_code == 7
        assert one_line(no_token).startswith("tidemarkctl: error: ")
        plaintext = run(base, "--timeout", "1", "stream", "list", "iot")
        assert plaintext.exit_code == 6
        assert "TLS" in one_line(plaintext)
