"""Store URIs: another scheme, or no port, is refused when the client is made, naming it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from connector import StoreClient
from connector.cli import cli
from connector.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("uri", "named"),
    [
        ("http://127.0.0.1:7070", "the scheme is 'http'"),
        ("grpc://127.0.0.1:7070?token_file=t", "the scheme is 'grpc'"),
        ("tidemark://127.0.0.1", "expected 'tidemark://host:port'"),
    ],
)
def test_a_uri_of_another_shape_is_refused_before_any_call(uri: str, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=named) as refused:
        StoreClient(uri, retry_timeout_s=60)
    assert repr(uri) in str(refused.value)


def test_the_command_line_refuses_another_scheme_with_exit_code_2() -> None:
    refused = CliRunner().invoke(cli, ["scope", "list", "--uri", "http://127.0.0.1:7070"])
    assert refused.exit_code == 2
    assert refused.stderr == (
        "tidemarkctl: error: invalid store uri 'http://127.0.0.1:7070': "
        "the scheme is 'http', a store's is 'tidemark://'\n"
    )
