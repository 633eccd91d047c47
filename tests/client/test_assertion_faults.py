"""Writers' assertions against a real server process: bad input, lost answers, kill -9.

- A falling assertion gets INVALID_ARGUMENT naming both values, one on a
  sealed stream FAILED_PRECONDITION, one without the ``write`` right
  PERMISSION_DENIED; none of them stores anything (riding on an append,
  the append is refused whole).
- An assertion the store made durable but whose answer never came back
  (the server killed with SIGKILL before it could answer), retried against
  the restarted server, is stored once (alone, or riding on an append after
  its events or before them), and the event-time index after the restart
  is what it was before the kill.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from connector._proto import store_pb2 as pb
from connector._proto import store_pb2_grpc
from connector._wire import GRPC_OPTIONS
from connector.client import StoreClient
from connector.model import Assertion
from connector.security import ClientCredentials, token_entry
from connector.store.file.journal import Journal
from tests.client.answer_dropping_proxy import AnswerDroppingProxy, Loss
from tests.store.test_event_time_store import event_times

#: No idle ticks and no writer timeouts: nothing but the test changes the store.
QUIET = ("--max-watermark-lag-ms", "600000", "--writer-idle-timeout-ms", "0")


def _journal_records(data_dir: pathlib.Path) -> list[dict[str, Any]]:
    journal = Journal(str(data_dir / "journal.log"))
    try:
        return list(journal.replay())
    finally:
        journal.close()


def _stub(address: str) -> tuple[grpc.Channel, store_pb2_grpc.SegmentStoreStub]:
    channel = grpc.insecure_channel(address, options=GRPC_OPTIONS)
    return channel, store_pb2_grpc.SegmentStoreStub(channel)


def _assertion(writer: str, number: int, event_time: int | None) -> pb.AssertWatermarkRequest:
    return pb.AssertWatermarkRequest(
        scope="iot", stream="sensors", writer_id=writer, number=number, event_time=event_time
    )


def _riding(
    segment: str, first: int, number: int, event_time: int | None, where: str = "assertion"
) -> pb.AppendRequest:
    """Writer c's event ``first`` to ``segment`` with its assertion ``number`` riding on it.

    ``where`` is the request's field: ``assertion`` (after the event) or ``joining`` (before).
    """
    riding = pb.AppendAssertion(number=number, event_time=event_time)
    return pb.AppendRequest(
        segment=segment,
        writer_id="c",
        first_event_number=first,
        events=[b"reading"],
        **{where: riding},
    )


def _state(client: StoreClient, segments: list[str]) -> dict[str, Any]:
    """Everything a client can see of the segments' time: infos and the index at every event."""
    return {s: (client.segment_info(s), event_times(client, s)) for s in segments}


@pytest.fixture
def tokens(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    """Token files of a writer (read and write on iot), a reader (read only) and an admin."""
    grants = {
        "admin": {"*": ["read", "write", "manage"]},
        "writer": {"iot": ["read", "write"]},
        "reader": {"iot": ["read"]},
    }
    files, entries = {}, []
    for holder, rights in grants.items():
        token = f"{holder}-token-" + "y" * 40
        files[holder] = tmp_path / f"{holder}.token"
        files[holder].write_text(token + "\n")
        entries.append(token_entry(holder, token, rights))
    files["table"] = tmp_path / "tokens.toml"
    files["table"].write_text("\n".join(entries))
    return files


def test_bad_assertions_get_their_status_and_store_nothing(
    spawn_server: Callable[..., Any], tmp_path: pathlib.Path, tokens: dict[str, pathlib.Path]
) -> None:
    data_dir = tmp_path / "data"
    server = spawn_server(data_dir, *QUIET, "--token-file", str(tokens["table"]))
    admin = StoreClient(server.uri, credentials=ClientCredentials(token_file=str(tokens["admin"])))
    admin.create_scope("iot")
    admin.create_stream("iot", "sensors", 2)
    admin.create_stream("iot", "done", 1)
    admin.seal_stream("iot", "done")
    admin.append("iot/sensors/0", "c", 0, [b"reading"])
    admin.assert_watermark("iot", "sensors", "c", 0, 1_000)
    segments = ["iot/sensors/0", "iot/sensors/1", "iot/done/0"]
    before = _state(admin, segments)
    records = _journal_records(data_dir)
    channel, stub = _stub(server.address)

    def code_of(request: pb.AssertWatermarkRequest, holder: str) -> tuple[Any, str]:
        metadata = ClientCredentials(token_file=str(tokens[holder])).call_metadata()
        with pytest.raises(grpc.RpcError) as refused:
            stub.AssertWatermark(request, metadata=metadata, timeout=10)
        return refused.value.code(), refused.value.details()

    code, details = code_of(_assertion("c", 1, 999), "writer")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "1000" in details and "999" in details, details
    sealed = pb.AssertWatermarkRequest(
        scope="iot", stream="done", writer_id="c", number=0, event_time=5
    )
    code, details = code_of(sealed, "writer")
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "sealed" in details, details
    code, _ = code_of(_assertion("c", 1, 2_000), "reader")
    assert code == grpc.StatusCode.PERMISSION_DENIED
    code, details = code_of(_assertion("c", 1, -5), "writer")
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "-5" in details, details
    code, details = code_of(_assertion("", 1, 5), "writer")
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "writer_id" in details, details

    # Riding on an append, a refused assertion refuses the append: nothing of either is stored.
    def append_code_of(request: pb.AppendRequest, holder: str) -> tuple[Any, str]:
        metadata = ClientCredentials(token_file=str(tokens[holder])).call_metadata()
        with pytest.raises(grpc.RpcError) as refused:
            stub.AppendEvents(request, metadata=metadata, timeout=10)
        return refused.value.code(), refused.value.details()

    code, details = append_code_of(_riding("iot/sensors/0", 1, 1, 999), "writer")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "1000" in details and "999" in details, details
    code, details = append_code_of(_riding("iot/done/0", 0, 0, 5), "writer")
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "sealed" in details, details
    code, _ = append_code_of(_riding("iot/sensors/1", 0, 1, 2_000), "reader")
    assert code == grpc.StatusCode.PERMISSION_DENIED
    # So does one riding before the events (the writer joining): they are not stored either.
    code, details = append_code_of(_riding("iot/sensors/0", 1, 1, 999, "joining"), "writer")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "1000" in details and "999" in details, details
    code, details = append_code_of(_riding("iot/sensors/0", 1, 1, None, "joining"), "writer")
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "idle mark" in details, details

    assert _state(admin, segments) == before
    assert _journal_records(data_dir) == records
    channel.close()
    admin.close()


@pytest.mark.parametrize(
    ("loss", "riding"),
    [
        *((loss, riding) for riding in (None, "assertion") for loss in (Loss.ANSWER, Loss.REQUEST)),
        (Loss.ANSWER, "joining"),  # stored before its event, answer lost: the retry joins once
    ],
    ids=["answer-alone", "request-alone", "answer-riding", "request-riding", "answer-joining"],
)
def test_an_assertion_killed_before_its_answer_is_stored_once_when_retried_after_a_restart(
    spawn_server: Callable[..., Any], tmp_path: pathlib.Path, loss: Loss, riding: str | None
) -> None:
    data_dir = tmp_path / "data"
    first = spawn_server(data_dir, *QUIET)
    with StoreClient(first.uri) as setup:
        setup.create_scope("iot")
        setup.create_stream("iot", "sensors", 2)
        setup.append("iot/sensors/0", "c", 0, [b"r0", b"r1"])
        setup.assert_watermark("iot", "sensors", "c", 0, 1_000)
        setup.append("iot/sensors/1", "c", 0, [b"r2"])
        setup.assert_watermark("iot", "sensors", "a", 0, 3_000)
    proxy = AnswerDroppingProxy(first.address)
    proxy.lose("AppendEvents" if riding else "AssertWatermark", times=None, loss=loss)
    channel, stub = _stub(proxy.uri.removeprefix("tidemark://"))
    with pytest.raises(grpc.RpcError) as lost:
        if riding:  # on writer c's next event to segment 1, after it or before it
            stub.AppendEvents(_riding("iot/sensors/1", 1, 1, 2_000, riding), timeout=10)
        else:
            stub.AssertWatermark(_assertion("c", 1, 2_000), timeout=10)
    assert lost.value.code() == grpc.StatusCode.UNAVAILABLE
    channel.close()
    with StoreClient(first.uri) as look:
        made = _state(look, ["iot/sensors/0", "iot/sensors/1"])
    first.process.kill()  # SIGKILL: no chance to answer, flush or close anything
    assert first.process.wait(timeout=10) == -9
    proxy.close()

    again = spawn_server(data_dir, *QUIET)
    with StoreClient(again.uri) as client:
        assert _state(client, ["iot/sensors/0", "iot/sensors/1"]) == made
        if riding:
            appended = client.append(
                "iot/sensors/1", "c", 1, [b"reading"], **{riding: Assertion(1, 2_000)}
            )
            result = appended.assertion if riding == "assertion" else appended.joining
            assert result.stored == (loss is Loss.REQUEST)
            assert appended.duplicates == (0 if loss is Loss.REQUEST else 1)
        else:
            retried = client.assert_watermark("iot", "sensors", "c", 1, 2_000)
            assert retried.stored == (loss is Loss.REQUEST)
        after = _state(client, ["iot/sensors/0", "iot/sensors/1"])
        for segment in ("iot/sensors/0", "iot/sensors/1"):
            assert after[segment][0].event_time_watermark == 2_000
    stored = [
        r
        for r in _journal_records(data_dir)
        if r["op"] == "assert" and r["w"] == "c" and r["k"] == 1
    ]
    assert len(stored) == 1, stored
    commits = [r for r in _journal_records(data_dir) if r["op"] == "commit" and r["w"] == "c"]
    assert len(commits) == (3 if riding else 2), commits  # the riding event once too
    again.process.kill()
    again.process.wait(timeout=10)
    third = spawn_server(data_dir, *QUIET)
    with StoreClient(third.uri) as client:
        assert _state(client, ["iot/sensors/0", "iot/sensors/1"]) == after
