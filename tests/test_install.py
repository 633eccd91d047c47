"""How a user installs Tidemark: the documentation's install lines, and the names they install."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import shlex
import tomllib

import connector

ROOT = pathlib.Path(__file__).resolve().parent.parent
DISTRIBUTION = "tidemark-store"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def documented_install_lines() -> list[str]:
    """Every ``pip install`` the README and docs/ show, in code spans and in code blocks."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    return re.findall(r"pip install [^`\n#]*[^`\n# ]", text)


def test_every_install_line_of_the_documentation_installs_this_checkout() -> None:
    lines = documented_install_lines()
    assert len(lines) >= 4, lines
    extras = set(_project()["optional-dependencies"])
    for line in lines:
        words = [w for w in shlex.split(line)[2:] if w != "-e"]
        assert len(words) == 1, f"{line!r} installs one thing"
        target, _, wanted = words[0].partition("[")
        assert target == ".", f"{line!r} installs {target!r}, not this checkout"
        named = set(wanted.removesuffix("]").split(",")) if wanted else set()
        assert named <= extras, f"{line!r} names extras pyproject.toml lacks: {named - extras}"


def test_the_distribution_is_tidemark_store_and_never_the_unrelated_tidemark() -> None:
    assert _project()["name"] == DISTRIBUTION
    installed = importlib.metadata.distribution(DISTRIBUTION)
    assert pathlib.Path(connector.__file__).parent.parent == ROOT
    scripts = {e.name for e in installed.entry_points if e.group == "console_scripts"}
    # The unrelated `tidemark` on the package index ships a `tidemark` command.
    assert scripts == {"tidemark-server", "tidemarkctl"}
