"""Which right each call needs, and what a token file grants: pure, no server."""

from __future__ import annotations

import pathlib

import pytest

from connector._proto import store_pb2 as pb
from connector.errors import InvalidArgumentError
from connector.security import Need, Right, TokenTable, hash_token, need_of, needs_of, token_entry

_SERVICE = "/tidemark.v1.SegmentStore/"


@pytest.mark.parametrize(
    ("method", "request_message", "need"),
    [
        ("CreateScope", pb.CreateScopeRequest(scope="iot"), Need(Right.MANAGE, "iot")),
        (
            "CreateStream",
            pb.CreateStreamRequest(scope="iot", stream="s"),
            Need(Right.MANAGE, "iot"),
        ),
        ("SealStream", pb.SealStreamRequest(scope="iot", stream="s"), Need(Right.MANAGE, "iot")),
        (
            "DeleteStream",
            pb.DeleteStreamRequest(scope="iot", stream="s"),
            Need(Right.MANAGE, "iot"),
        ),
        ("ScaleStream", pb.ScaleStreamRequest(scope="iot", stream="s"), Need(Right.MANAGE, "iot")),
        (
            "DescribeStream",
            pb.DescribeStreamRequest(scope="iot", stream="s"),
            Need(Right.READ, "iot"),
        ),
        ("AppendEvents", pb.AppendRequest(segment="iot/s/0"), Need(Right.WRITE, "iot")),
        ("ReadSegment", pb.ReadRequest(segment="iot/s/3"), Need(Right.READ, "iot")),
        ("GetSegmentInfo", pb.SegmentInfoRequest(segment="iot/s/0"), Need(Right.READ, "iot")),
        ("GetState", pb.GetStateRequest(key="readergroup/iot/g"), Need(Right.READ, "iot")),
        (
            "CompareAndSetState",
            pb.CompareAndSetStateRequest(key="readergroup/iot/g"),
            Need(Right.READ, "iot"),
        ),
        ("GetState", pb.GetStateRequest(key="loose-key"), Need(Right.READ, "*")),
        ("DeleteScope", pb.DeleteScopeRequest(scope="iot"), Need(Right.MANAGE, "iot")),
        (
            "DeleteState",
            pb.DeleteStateRequest(key="readergroup/iot/g"),
            Need(Right.READ, "iot"),
        ),
    ],
)
def test_each_call_needs_one_right_on_the_scope_it_touches(method, request_message, need):
    assert need_of(_SERVICE + method, request_message) == need


@pytest.mark.parametrize(
    ("method", "request_message", "scopes"),
    [
        (
            "DescribeTails",
            pb.DescribeTailsRequest(
                streams=[pb.KnownTails(scope="iot", stream="a"), pb.KnownTails(scope="ops")]
            ),
            ["iot", "ops"],
        ),
        (
            "ReadSegments",
            pb.ReadSegmentsRequest(
                cursors=[pb.Cursor(segment="iot/a/0"), pb.Cursor(segment="iot/b/1")],
                released=["ops/c/2"],
            ),
            ["iot", "ops"],
        ),
        (
            "PlanReads",
            pb.PlanReadsRequest(plans=[pb.PlanReadRequest(segment="x/s/0")]),
            ["x"],
        ),
        ("ReadSegments", pb.ReadSegmentsRequest(session_id=7), []),
    ],
)
def test_a_call_of_many_items_needs_read_on_the_scope_of_each_it_names(
    method, request_message, scopes
):
    needs = needs_of(_SERVICE + method, request_message)
    assert needs == tuple(Need(Right.READ, scope) for scope in scopes)


def test_a_store_call_without_a_rule_needs_manage_on_every_scope():
    assert need_of(_SERVICE + "SomeNewCall", object()) == Need(Right.MANAGE, "*")


def test_calls_outside_the_store_service_need_no_right():
    assert need_of("/grpc.health.v1.Health/Check", object()) is None


def _table(tmp_path: pathlib.Path, text: str) -> TokenTable:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    return TokenTable(path)


def test_a_token_file_grants_rights_per_scope_and_keeps_only_hashes(tmp_path):
    token = "t" * 43
    table = _table(tmp_path, token_entry("ingest", token, {"iot": ["read", "write"]}))
    assert token not in (tmp_path / "tokens.toml").read_text()
    assert hash_token(token) in (tmp_path / "tokens.toml").read_text()
    principal = table.principal(token)
    assert principal is not None and principal.name == "ingest"
    assert principal.allows(Need(Right.WRITE, "iot"))
    assert not principal.allows(Need(Right.MANAGE, "iot"))
    assert not principal.allows(Need(Right.READ, "other"))
    assert not principal.allows(Need(Right.READ, "*"))
    assert table.principal("u" * 43) is None


def test_a_grant_on_every_scope_covers_keys_outside_any_scope(tmp_path):
    token = "a" * 43
    table = _table(tmp_path, token_entry("admin", token, {"*": ["read"]}))
    principal = table.principal(token)
    assert principal is not None
    assert principal.allows(Need(Right.READ, "*")) and principal.allows(Need(Right.READ, "iot"))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[[token]]\nname = "x"\nsha256 = "abc"\n', "'abc'"),
        ('[[token]]\nsha256 = "' + "0" * 64 + '"\n', "'name'"),
        (
            '[[token]]\nname = "x"\nsha256 = "' + "0" * 64 + '"\nrights = { iot = ["fly"] }\n',
            "['fly']",
        ),
        ("[[token]\n", "not valid TOML"),
    ],
)
def test_a_bad_token_file_is_refused_naming_the_bad_value(tmp_path, text, named):
    with pytest.raises(InvalidArgumentError, match=named.replace("[", r"\[").replace("]", r"\]")):
        _table(tmp_path, text)


def test_a_failed_reload_keeps_the_previous_tokens(tmp_path):
    token = "k" * 43
    table = _table(tmp_path, token_entry("one", token, {"iot": ["read"]}))
    (tmp_path / "tokens.toml").write_text("not toml [")
    with pytest.raises(InvalidArgumentError):
        table.reload()
    assert table.principal(token) is not None
