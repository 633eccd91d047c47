"""Bytes that do not decode, and overlong tokens, against real server processes.

Issue 21, finding 3: a request that does not decode got ``UNKNOWN`` and an
ERROR traceback in the log, before any token check, so anyone who reached the
port could fill the log. Finding 4: an authorization header over 8 KiB got
gRPC's ``RESOURCE_EXHAUSTED`` instead of the refusal of a bad token.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from connector._proto import store_pb2 as pb
from connector._wire import GRPC_OPTIONS
from connector.security import token_entry
from tests.conftest import ServerProcess

pytestmark = pytest.mark.slow

#: A length-delimited field 1 of two bytes that are not UTF-8, then a truncated tag.
UNDECODABLE = b"\x0a\x02\xff\xfe\xff"
TOKEN = "undecodable-test-token-" + "t" * 40
_SERVICE = pb.DESCRIPTOR.services_by_name["SegmentStore"]
RPCS = [method.name for method in _SERVICE.methods]


@dataclass
class Target:
    """A server process and a channel to it; ``token`` is None when the server needs none."""

    server: ServerProcess
    channel: grpc.Channel
    token: str | None

    def call(self, method: str, request: bytes, metadata: tuple = ()) -> grpc.StatusCode:
        """Sends raw ``request`` bytes to ``method``; returns the status code."""
        path = method if method.startswith("/") else f"/{_SERVICE.full_name}/{method}"
        try:
            self.channel.unary_unary(path)(request, metadata=metadata, timeout=10)
        except grpc.RpcError as error:
            return error.code()
        return grpc.StatusCode.OK


@pytest.fixture(params=["plaintext", "tls and tokens"])
def target(request, tmp_path, spawn_server, pki) -> Iterator[Target]:
    if request.param == "plaintext":
        server = spawn_server(tmp_path / "data")
        channel = grpc.insecure_channel(server.address, options=GRPC_OPTIONS)
        token = None
    else:
        tokens = tmp_path / "tokens.toml"
        tokens.write_text(token_entry("admin", TOKEN, {"*": ["read", "write", "manage"]}))
        server = spawn_server(
            tmp_path / "data",
            *("--tls-cert", pki.server.cert_file, "--tls-key", pki.server.key_file),
            *("--token-file", str(tokens)),
        )
        credentials = grpc.ssl_channel_credentials(pathlib.Path(pki.ca).read_bytes())
        channel = grpc.secure_channel(server.address, credentials, options=GRPC_OPTIONS)
        token = TOKEN
    yield Target(server, channel, token)
    channel.close()


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def _assert_no_traceback(target: Target) -> None:
    log = target.server.log()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


def test_every_rpc_refuses_undecodable_bytes_without_a_traceback(target: Target):
    codes = {rpc: target.call(rpc, UNDECODABLE) for rpc in RPCS}
    if target.token is not None:  # no token: refused before the bytes are read
        assert codes == dict.fromkeys(RPCS, grpc.StatusCode.UNAUTHENTICATED)
        wrong = {rpc: target.call(rpc, UNDECODABLE, _bearer("w" * 43)) for rpc in RPCS}
        assert wrong == dict.fromkeys(RPCS, grpc.StatusCode.UNAUTHENTICATED)
        codes = {rpc: target.call(rpc, UNDECODABLE, _bearer(target.token)) for rpc in RPCS}
    assert codes == dict.fromkeys(RPCS, grpc.StatusCode.INVALID_ARGUMENT)
    _assert_no_traceback(target)
    log = target.server.log()
    lines = [line for line in log.splitlines() if "did not decode" in line]
    assert len(lines) == 1, log[-3000:]  # 16 refusals (or 48), one line
    assert "refused 1 request(s)" in lines[0]


def test_health_and_reflection_refuse_undecodable_bytes_too(target: Target):
    health = "/grpc.health.v1.Health/"
    assert target.call(health + "Check", UNDECODABLE) == grpc.StatusCode.INVALID_ARGUMENT
    watch = target.channel.unary_stream(health + "Watch")
    with pytest.raises(grpc.RpcError) as refused:
        list(watch(UNDECODABLE, timeout=10))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    reflect = target.channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    )
    with pytest.raises(grpc.RpcError) as refused:
        list(reflect(iter([UNDECODABLE]), timeout=10))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert target.call(health + "Check", b"") == grpc.StatusCode.OK  # a real check still works
    _assert_no_traceback(target)


@pytest.mark.parametrize("length", [8_200, 12_000, 16_500, 60_000])
def test_an_overlong_token_is_refused_like_any_wrong_token(target: Target, length: int):
    """Finding 4: over 8 KiB, gRPC's metadata limit answered RESOURCE_EXHAUSTED."""
    codes = [target.call("ListScopes", b"", _bearer("x" * length)) for _ in range(5)]
    if target.token is None:  # nobody checks tokens: the call is simply answered
        assert codes == [grpc.StatusCode.OK] * 5
    else:
        assert codes == [grpc.StatusCode.UNAUTHENTICATED] * 5
    _assert_no_traceback(target)


def test_metadata_beyond_the_server_s_limit_is_refused_by_grpc(target: Target):
    """Documented: past 64 KiB of metadata gRPC refuses the call before the server sees it."""
    code = target.call("ListScopes", b"", _bearer("x" * 70_000))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
