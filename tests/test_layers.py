"""The reader core and the adapters: no import circle, and nothing in the core imports an adapter.

Read from the source (:mod:`tests.layers`), so it runs without either engine.
"""

from __future__ import annotations

from tests.layers import cycles, import_graph

ADAPTERS = ("spark_adapter", "flink_adapter")


def test_no_module_of_connector_imports_an_adapter() -> None:
    graph = import_graph()
    upward = sorted(
        (module, target)
        for module, targets in graph.items()
        if module.startswith("connector")
        for target in targets
        if target.startswith(ADAPTERS)
    )
    assert upward == []


def test_the_reader_core_and_the_adapters_take_part_in_no_import_circle() -> None:
    graph = import_graph()
    ours = ("connector.reader", *ADAPTERS)
    circles = [c for c in cycles(graph) if any(m.startswith(ours) for m in c)]
    assert circles == []
    assert graph["connector.reader.source.planner"], "the graph was read"


def test_an_import_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
