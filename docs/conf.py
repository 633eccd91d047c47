"""The documentation site: README.md, CONTRIBUTING.md and docs/, built by Sphinx (``make docs``).

The source is the repository itself, so the Markdown links between the
README, the pages and bench/RESULTS.md are the same on the site as where
the files are read as they are. The pages are MyST Markdown; the API
reference is generated from the docstrings of the public names
(``docs/reference/``), whose roles (``:class:``, ``:func:``) are Sphinx's.
PyFlink is not in the environment that builds the site, so autodoc imports
the Flink adapter over stand-ins for ``pyflink`` and ``pemja``.

``make docs`` builds in strict mode: every warning fails the build (a link
to a page or heading that does not exist, a page in no table of contents,
a public name missing from the reference).
"""

from __future__ import annotations

import ast
import pathlib
import re

from sphinx.application import Sphinx
from sphinx.util import logging

ROOT = pathlib.Path(__file__).resolve().parent.parent

project = "Tidemark"
author = "The Tidemark authors"
copyright = "the Tidemark authors"  # noqa: A001 - Sphinx's name for it

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]

root_doc = "docs/index"
include_patterns = ["README.md", "CONTRIBUTING.md", "docs/**.md", "bench/RESULTS.md"]
exclude_patterns = ["docs/_build", "docs/_extra"]
source_suffix = {".md": "markdown"}

# GitHub's anchors for headings, so `page.md#a-heading` links work here and there alike.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
suppress_warnings: list[str] = []

autodoc_mock_imports = ["pyflink", "pemja"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "furo"
html_title = "Tidemark"
html_show_sourcelink = False
# The site's front door, index.html, leads to docs/index.html (the pages' table of contents).
html_extra_path = ["_extra"]  # beside this file

#: Each reference page and the package whose ``__all__`` it documents, name by name.
REFERENCE = {
    "connector.md": "connector",
    "reader.md": "connector.reader",
    "errors.md": "connector.errors",
    "spark_adapter.md": "spark_adapter",
    "flink_adapter.md": "flink_adapter",
}

_DOCUMENTED = re.compile(r"^\.\. auto(?:class|function|data|exception):: ([\w.]+)$", re.M)


def public_names(package: str) -> list[str]:
    """The names of ``package``'s ``__all__``, read from its source (nothing is imported)."""
    path = ROOT.joinpath(*package.split("."))
    source = (path / "__init__.py") if path.is_dir() else path.with_suffix(".py")
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return []


def _check_reference(_app: Sphinx) -> None:
    """Warns (so a strict build fails) for each public name a reference page leaves out."""
    log = logging.getLogger("tidemark.reference")
    for page, package in REFERENCE.items():
        text = (ROOT / "docs" / "reference" / page).read_text()
        documented = {name.rpartition(".")[2] for name in _DOCUMENTED.findall(text)}
        for name in sorted(set(public_names(package)) - documented):
            log.warning("docs/reference/%s does not document %s.%s", page, package, name)


def setup(app: Sphinx) -> None:
    """Checks the reference against the packages' ``__all__`` as the build starts."""
    app.connect("builder-inited", _check_reference)
