"""The documentation's shell commands, as tests run them: exactly as written, through bash.

A test picks a ``sh`` block of a page (the README or one of ``docs/``) by a
piece of its text, gets its commands (a command's continuation lines joined,
comment lines dropped) and runs each with :func:`shell`, after
:func:`localized` swapped the page's fixed places (``/var/lib/tidemark``,
port 7070) for the test's own; nothing else of a command changes.
"""

from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys
from collections.abc import Mapping

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The documentation's pages, one per audience and task.
DOCS = ROOT / "docs"
#: Where this interpreter's console scripts (tidemark-server, tidemarkctl) are.
BIN = pathlib.Path(sys.executable).parent


def shell_block(containing: str, page: pathlib.Path = README) -> list[str]:
    """The commands of ``page``'s one ``sh`` block whose text contains ``containing``."""
    blocks = re.findall(r"```sh[^\n]*\n(.*?)```", page.read_text(), flags=re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"{len(found)} sh blocks of {page.name} contain {containing!r}"
    commands: list[str] = []
    pending = ""
    for line in found[0].splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line + "\n"
        if not line.split("#", 1)[0].rstrip().endswith("\\"):
            commands.append(pending)
            pending = ""
    return commands


def free_port() -> int:
    """A loopback port nothing listens on now: the test's own, in place of a page's."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def localized(command: str, places: Mapping[str, str]) -> str:
    """``command`` with each of the page's fixed ``places`` replaced by the test's own."""
    for written, here in places.items():
        assert written in command, f"{written!r} is not in {command!r}"
        command = command.replace(written, here)
    return command


#: What a make running the tests (``make test``) leaves in their environment: with it, a
#: page's ``make`` command runs as a sub-make, which prints its directory in its output.
_OUTER_MAKE = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")


def shell_env(**extra: str) -> dict[str, str]:
    """The environment a documented command runs in: this venv's commands first on the PATH.

    As a user's shell has it: no outer make's variables, so ``make`` there is a top-level make.
    """
    inherited = {k: v for k, v in os.environ.items() if k not in _OUTER_MAKE}
    return {**inherited, "PATH": f"{BIN}:{os.environ['PATH']}", **extra}


def shell(command: str, cwd: pathlib.Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Runs ``command`` with bash in ``cwd``; returns what it printed and its exit code."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=shell_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
