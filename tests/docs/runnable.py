"""The documentation's runnable blocks: fenced code marked ``runnable`` after its language.

A page marks a block a test runs as written by a second word on its fence,
```` ```sh runnable ```` or ```` ```python runnable ````; GitHub and the site
show it as the language alone. The README's quickstart and the Spark page
have such blocks: :mod:`tests.docs.test_quickstart` runs the one,
:mod:`tests.spark.test_spark_page` the other.
"""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass

__all__ = ["Block", "as_shell_script", "runnable_blocks"]

_RUNNABLE = re.compile(r"^```(\w+) runnable\n(.*?)^```$", flags=re.M | re.S)


@dataclass(frozen=True)
class Block:
    """A runnable block: its language (``sh`` or ``python``) and its code."""

    language: str
    code: str


def runnable_blocks(page: pathlib.Path) -> list[Block]:
    """``page``'s blocks marked runnable, in the order they appear."""
    blocks = [Block(m.group(1), m.group(2)) for m in _RUNNABLE.finditer(page.read_text())]
    unknown = {b.language for b in blocks} - {"sh", "python"}
    assert not unknown, f"{page.name}: runnable blocks in {unknown}"
    return blocks


def as_shell_script(blocks: list[Block]) -> str:
    """The blocks as one bash script, in order, as a user types them into one shell.

    A ``python`` block is what the user types into ``python`` there: the
    script hands it to that shell's ``python`` as its input.
    """
    parts = []
    for block in blocks:
        if block.language == "sh":
            parts.append(block.code)
        else:
            parts.append(f"python - <<'PYTHON'\n{block.code}PYTHON\n")
    return "\n".join(parts)
