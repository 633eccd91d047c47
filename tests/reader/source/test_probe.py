"""A read checked against its store once, when an engine defines it (:func:`probe_store`).

Against a real store server; the engines' option names come in through
:class:`OptionNames`, as each adapter hands them over.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from connector.client import StoreClient, StreamManager
from connector.errors import InvalidArgumentError, NotFoundError, StoreUnavailableError
from connector.reader.source import OptionNames, ReadSpec, StreamCut, StreamRead, probe_store

NAMES = OptionNames.of(
    {"store": "with_store", "streams": "for_stream", "start": "start=", "end": "end="}
)


def spec(uri: str, stream: str, start: Any = "earliest", end: Any = None) -> ReadSpec:
    cut = None if end is None else StreamCut.of(end)
    return ReadSpec.build(
        names=NAMES,
        uri=uri,
        streams=[StreamRead(stream, StreamCut.of(start), cut)],
        deserializer="bytes",
    )


@pytest.fixture
def uri(start_store: Callable[..., Any]) -> str:
    server = start_store()
    with StoreClient(server.uri) as client:
        StreamManager(client).create_scope("probe")
        StreamManager(client).create_stream("probe", "events", segment_count=2)
    return str(server.uri)


def test_a_readable_spec_passes(uri: str) -> None:
    probe_store(spec(uri, "probe/events", {"probe/events/0": 0, "probe/events/1": 0}))


def test_a_missing_stream_is_named_with_the_streams_option(uri: str) -> None:
    with pytest.raises(NotFoundError, match="for_stream: stream 'probe/missing' does not exist"):
        probe_store(spec(uri, "probe/missing"))


@pytest.mark.parametrize("field", ["start", "end"])
def test_a_cut_segment_the_stream_lacks_is_named_with_the_cuts_option(uri: str, field: str) -> None:
    cut = {"probe/events/0": 0, "probe/events/5": 0}
    given = {field: cut} if field == "start" else {"end": cut}
    with pytest.raises(InvalidArgumentError) as error:
        probe_store(spec(uri, "probe/events", **given))
    message = str(error.value)
    assert message.startswith(f"{field}= ")
    assert "names segment 'probe/events/5', which stream 'probe/events' does not have" in message
    assert "['probe/events/0', 'probe/events/1']" in message


def test_a_store_nobody_listens_for_fails_at_once_naming_the_uri() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    down = f"tidemark://127.0.0.1:{port}"
    began = time.monotonic()
    with pytest.raises(StoreUnavailableError, match=f"with_store: the store '{down}' cannot be"):
        probe_store(spec(down, "probe/events"), timeout_s=30.0)
    assert time.monotonic() - began < 30.0, "a refused connection needs no wait for the deadline"


def test_a_port_that_takes_the_connection_and_says_nothing_fails_once_the_bound_passed() -> None:
    """A stopped store process: the kernel takes the connection, nobody speaks."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        silent = f"tidemark://127.0.0.1:{listener.getsockname()[1]}"
        began = time.monotonic()
        with pytest.raises(StoreUnavailableError, match=f"with_store: the store '{silent}' cannot"):
            probe_store(spec(silent, "probe/events"), timeout_s=1.0)
        assert time.monotonic() - began >= 1.0, "the store had the whole bound to answer"
