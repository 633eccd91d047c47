"""Bearer tokens and scope rights enforced by a real server over gRPC."""

from __future__ import annotations

import pathlib

import pytest

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.client import FetchSession
from connector.errors import PermissionDeniedError, UnauthenticatedError
from connector.model import PlannedRead, PlanRequest, StreamTails
from connector.reader import ReaderConfig, ReaderGroupManager, TimeDomain
from connector.security import ClientCredentials, TokenTable, token_entry
from tests.security.conftest import GRANTS


@pytest.fixture
def server(start_secure_store, token_table_file):
    return start_secure_store(tokens=TokenTable(token_table_file))


@pytest.fixture
def client_of(server, token_of):
    clients: list[StoreClient] = []

    def client(holder: str | None) -> StoreClient:
        credentials = ClientCredentials(token_file=token_of[holder]) if holder else None
        made = StoreClient(server.uri, retry_timeout_s=1.0, credentials=credentials)
        clients.append(made)
        return made

    yield client
    for made in clients:
        made.close()


@pytest.fixture
def iot(client_of):
    """Scope iot with stream sensors (2 segments) and one event, made by admin."""
    admin = client_of("admin")
    StreamManager(admin).create_scope("iot")
    StreamManager(admin).create_stream("iot", "sensors", segment_count=2)
    with EventWriter(admin, "iot/sensors", JsonSerializer()) as writer:
        writer.write_event({"n": 1}, routing_key="a")
    return admin


def _segment_ends(client: StoreClient) -> list[int]:
    description = client.describe_stream("iot", "sensors")
    return [client.segment_info(s.segment).write_offset for s in description.segments]


def test_a_call_without_a_token_is_refused_and_changes_nothing(client_of, iot):
    anonymous = client_of(None)
    before = _segment_ends(iot)
    how = r"requires a bearer token: .* \(tidemark://host:port\?token_file=FILE\)"
    with pytest.raises(UnauthenticatedError, match=how):
        anonymous.describe_stream("iot", "sensors")
    with pytest.raises(UnauthenticatedError):
        anonymous.read("iot/sensors/0", 0)
    with pytest.raises(UnauthenticatedError):
        anonymous.append("iot/sensors/0", "intruder", 0, [b"x"])
    with pytest.raises(UnauthenticatedError):
        anonymous.seal_stream("iot", "sensors")
    with pytest.raises(UnauthenticatedError):
        anonymous.create_scope("mine")
    assert _segment_ends(iot) == before
    assert not iot.describe_stream("iot", "sensors").sealed


def test_a_wrong_token_is_refused(server, tmp_path, iot):
    wrong = tmp_path / "wrong.token"
    wrong.write_text("not-a-token-of-this-store-" + "z" * 40)
    with StoreClient(server.uri, credentials=ClientCredentials(token_file=str(wrong))) as client:
        with pytest.raises(UnauthenticatedError, match="not valid"):
            client.describe_stream("iot", "sensors")


def test_a_reader_token_reads_but_cannot_write_or_manage(client_of, iot):
    reader = client_of("iot-reader")
    before = _segment_ends(iot)
    assert len(reader.describe_stream("iot", "sensors").segments) == 2
    with pytest.raises(PermissionDeniedError, match="'write' right on scope 'iot'"):
        reader.append("iot/sensors/0", "w", 0, [b"x"])
    with pytest.raises(PermissionDeniedError, match="'manage'"):
        reader.seal_stream("iot", "sensors")
    assert _segment_ends(iot) == before


def test_a_token_of_another_scope_can_neither_read_nor_steer_this_one(client_of, iot):
    ReaderGroupManager(iot).create_reader_group("iot", "dashboards", ["iot/sensors"])
    key = "readergroup/iot/dashboards"
    state = iot.get_state(key)
    outsider = client_of("other")
    with pytest.raises(PermissionDeniedError):
        outsider.read("iot/sensors/0", 0)
    with pytest.raises(PermissionDeniedError):
        outsider.get_state(key)
    with pytest.raises(PermissionDeniedError):
        outsider.compare_and_set_state(key, state.revision, b"{}")
    assert iot.get_state(key).value == state.value


def test_an_intruder_learns_no_writer_sequence_and_cannot_take_a_writer_id_over(client_of, iot):
    victim = client_of("iot-writer")
    victim.append("iot/sensors/1", "victim-writer", 0, [b"v0"])
    outsider = client_of("other")
    with pytest.raises(PermissionDeniedError) as refused:
        outsider.append("iot/sensors/1", "victim-writer", 5, [b"evil"])
    assert "next" not in str(refused.value) and "expected" not in str(refused.value)
    result = victim.append("iot/sensors/1", "victim-writer", 1, [b"v1"])
    assert result.appended == 1 and result.duplicates == 0


def test_the_right_tokens_write_and_read_through_writers_and_reader_groups(client_of, iot):
    writer_client = client_of("iot-writer")
    with EventWriter(writer_client, "iot/sensors", JsonSerializer()) as writer:
        for n in range(2, 6):
            writer.write_event({"n": n}, routing_key=f"k{n}")
    reader_client = client_of("iot-reader")
    group = ReaderGroupManager(reader_client).create_reader_group("iot", "g", ["iot/sensors"])
    seen = []
    config = ReaderConfig(time_domain=TimeDomain.PROCESSING_TIME)
    with group.create_reader("r1", JsonSerializer(), config) as reader:
        for _ in range(50):
            read = reader.read_next_event(timeout_ms=100)
            if read is not None and read.is_event:
                seen.append(read.event["n"])
            if len(seen) == 5:
                break
    assert sorted(seen) == [1, 2, 3, 4, 5]


def test_credentials_in_the_uri_work_like_credentials_given_to_the_client(server, token_of, iot):
    uri = f"{server.uri}?token_file={token_of['iot-reader']}"
    with StoreClient(uri) as client:
        assert client.describe_stream("iot", "sensors").scope == "iot"
    assert pathlib.Path(token_of["iot-reader"]).read_text().strip() not in uri


def test_calls_over_many_segments_need_read_on_every_scope_they_name(client_of, iot):
    admin = iot
    StreamManager(admin).create_scope("secret")
    StreamManager(admin).create_stream("secret", "s", segment_count=1)
    reader = client_of("iot-reader")
    [tails] = reader.describe_tails(["iot/sensors"])
    assert isinstance(tails, StreamTails) and len(tails.segments) == 2
    [plan] = reader.plan_reads([PlanRequest("iot/sensors/0", 0)])
    assert isinstance(plan, PlannedRead)
    with pytest.raises(PermissionDeniedError, match="'read' right on scope 'secret'"):
        reader.describe_tails(["iot/sensors", "secret/s"])
    with pytest.raises(PermissionDeniedError, match="'secret'"):
        reader.plan_reads([PlanRequest("iot/sensors/0", 0), PlanRequest("secret/s/0", 0)])
    with FetchSession(reader) as session:
        session.add("iot/sensors/0", 0)
        session.add("secret/s/0", 0)
        with pytest.raises(PermissionDeniedError, match="'secret'"):
            session.fetch()
        session.release("secret/s/0")
        assert [r.segment for r in session.fetch().reads] == ["iot/sensors/0"]
    with pytest.raises(UnauthenticatedError):
        FetchSession(client_of(None)).fetch()


def test_a_fetch_session_answers_only_what_its_caller_may_read_now(
    client_of, iot, server, token_table_file, token_of
):
    reader = client_of("iot-reader")
    with FetchSession(reader) as session:
        session.add("iot/sensors/0", 0)
        session.add("iot/sensors/1", 0)
        assert len(session.fetch().reads) == 2
        grants = {**GRANTS, "iot-reader": {"elsewhere": ["read"]}}
        token_table_file.write_text(
            "\n".join(
                token_entry(holder, pathlib.Path(token_of[holder]).read_text().strip(), granted)
                for holder, granted in grants.items()
            )
        )
        server.tokens.reload()
        iot.append("iot/sensors/1", "w", 0, [b"after the reload"])
        result = session.fetch(5_000)  # names no segment: only the token is checked...
        assert result.reads == ()  # ...and the right again on what it would answer
        [(segment, error)] = result.failures
        assert segment == "iot/sensors/1" and isinstance(error, PermissionDeniedError)
        assert session.segments == ("iot/sensors/0",)
