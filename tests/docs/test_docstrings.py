"""The public classes' docstrings name the arguments their constructors take, no other.

A class of the public API (``__all__`` of ``connector``, ``connector.reader``
and ``spark_adapter``) whose docstring has an ``Args:`` or ``Attributes:``
section documents there exactly its constructor's parameters: a name a
user copies from the docstring is one the constructor accepts.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

_PACKAGES = ("connector", "connector.reader", "spark_adapter")
_SECTION = re.compile(r"^(?:Args|Attributes):\n((?:    .*\n|\n)+)", flags=re.M)
_ENTRY = re.compile(r"^    (\w+)(?: \([^)]*\))?:", flags=re.M)


def _documented_classes() -> list[tuple[str, type]]:
    """Each public class with an arguments or attributes section, by its qualified name."""
    found = []
    for package in _PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and _SECTION.search(f"{inspect.getdoc(value)}\n"):
                found.append((f"{package}.{name}", value))
    return found


@pytest.mark.parametrize(("name", "cls"), _documented_classes())
def test_a_public_classs_docstring_documents_exactly_its_constructors_parameters(
    name: str, cls: type
) -> None:
    [section] = _SECTION.findall(f"{inspect.getdoc(cls)}\n")
    documented = set(_ENTRY.findall(section))
    parameters = set(inspect.signature(cls).parameters)
    assert documented == parameters, f"{name}: documented {documented ^ parameters} differ"
