"""Tests of ``tidemarkctl``; the invocations most of them share."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner, Result

from connector.cli import cli


def run(uri: str, *args: str) -> Result:
    """``tidemarkctl --uri URI --timeout 2 ARGS...``, in process."""
    return CliRunner().invoke(cli, ["--uri", uri, "--timeout", "2", *args])


def ok_json(uri: str, *args: str) -> Any:
    """The ``--json`` answer of a command that must succeed."""
    result = run(uri, "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def one_line(result: Result) -> str:
    """The one line a command printed (an error says itself in one line)."""
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]
