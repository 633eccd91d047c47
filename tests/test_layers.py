"""The layers: no import circle, nothing in connector imports an adapter, the server stands alone.

The store server, the storages and the operations tools (metrics, health)
import nothing of the reader core or the adapters, directly or through
anything they import: the server stands below everything that reads.
Read from the source (:mod:`tests.layers`), so it runs without either
engine; one test also looks at what a server process really loads.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.layers import ROOT, climbs, cycles, import_graph

ADAPTERS = ("spark_adapter", "flink_adapter")
#: The store server and what it stands on.
SERVER_SIDE = ("connector.server", "connector.store", "connector.ops")
#: What reads from the store: nothing on the server side may import it.
READING_SIDE = ("connector.reader", *ADAPTERS)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """The project's import graph, read once for the module's tests."""
    return import_graph()


def test_no_module_of_connector_imports_an_adapter(graph: dict[str, set[str]]) -> None:
    upward = sorted(
        (module, target)
        for module, targets in graph.items()
        if module.startswith("connector")
        for target in targets
        if target.startswith(ADAPTERS)
    )
    assert upward == []


def test_the_reader_core_and_the_adapters_take_part_in_no_import_circle(
    graph: dict[str, set[str]],
) -> None:
    ours = ("connector.reader", *ADAPTERS)
    circles = [c for c in cycles(graph) if any(m.startswith(ours) for m in c)]
    assert circles == []
    assert graph["connector.reader.source.planner"], "the graph was read"


def test_an_import_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_server_store_and_ops_import_nothing_of_the_reader_core_or_the_adapters(
    graph: dict[str, set[str]],
) -> None:
    assert any(m.startswith("connector.ops") for m in graph), "the graph was read"
    assert climbs(graph, SERVER_SIDE, READING_SIDE) == []


def test_an_import_that_climbs_is_found_with_its_path() -> None:
    graph = {"low.a": {"mid"}, "mid": {"high.b"}, "high.b": set(), "low.c": set()}
    assert climbs(graph, ("low",), ("high",)) == [["low.a", "mid", "high.b"]]


def test_a_store_server_process_loads_no_module_of_the_reader_core_or_the_adapters() -> None:
    """What ``tidemark-server`` imports, packages' ``__init__`` included, in its own process."""
    listing = (
        "import sys, connector.server, connector.store, connector.ops\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", listing],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert "connector.server.servicer" in loaded, "the server was imported"
    assert [m for m in loaded if m.startswith(READING_SIDE)] == []
