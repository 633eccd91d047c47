"""The documentation site builds in strict mode, every page and the API reference with it.

The build is ``make docs``'s: Sphinx over the repository with docs/conf.py,
every warning an error (a broken link or heading anchor, a page in no table
of contents, a public name missing from the reference).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests.readme import README, ROOT

pytestmark = pytest.mark.slow

#: What ``make docs`` runs, before its output folder.
SPHINX = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-c", "docs"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The site, built once from this checkout into a folder of the test's own."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [*SPHINX, ".", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def test_every_page_of_docs_and_the_readme_are_on_the_site(site: pathlib.Path) -> None:
    pages = [p.stem for p in (ROOT / "docs").glob("*.md") if p.stem != "index"]
    assert pages and all((site / "docs" / f"{page}.html").exists() for page in pages)
    assert (site / "README.html").exists() and (site / "CONTRIBUTING.html").exists()
    assert (site / "docs" / "index.html").exists() and (site / "index.html").exists()


def test_the_api_reference_shows_the_public_names_docstrings(site: pathlib.Path) -> None:
    reference = site / "docs" / "reference"
    writer = (reference / "connector.html").read_text()
    assert 'id="connector.WriterConfig"' in writer
    assert "assert_watermarks_from" in writer
    spark = (reference / "spark_adapter.html").read_text()
    assert 'id="spark_adapter.event_time"' in spark
    # Read without PyFlink installed: the builder's methods are there all the same.
    flink = (reference / "flink_adapter.html").read_text()
    assert 'id="flink_adapter.FlinkTidemarkReaderBuilder.with_time_domain"' in flink


def test_the_readme_is_a_way_in_of_at_most_300_lines_with_a_quickstart_of_at_most_60() -> None:
    lines = README.read_text().splitlines()
    start = lines.index("## Quickstart")
    end = next(n for n in range(start + 1, len(lines)) if lines[n].startswith("## "))
    assert len(lines) <= 300
    assert end - start <= 60
