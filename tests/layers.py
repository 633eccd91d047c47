"""Looking at the code's layers from outside: its import graph and a call's path through it.

- :func:`import_graph`: every explicit import between the project's modules
  (``connector``, ``spark_adapter``, ``flink_adapter``), read from the source
  with :mod:`ast` (imports inside functions and ``TYPE_CHECKING`` blocks
  included); a module's implicit import of its parent package is not an edge.
- :func:`climbs`: the import paths from one set of packages to another
  (what a lower layer reaches of a higher one).
- :func:`call_path`: what a call does across the core and an adapter, seen
  with :func:`sys.setprofile`: the core functions the adapter's own frames
  call, and any adapter function called while a core frame is running.
"""

from __future__ import annotations

import ast
import pathlib
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("connector", "spark_adapter", "flink_adapter")


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imported(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        prefix = node.module or ""
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            prefix = ".".join([*base, *([node.module] if node.module else [])])
        yield from (f"{prefix}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """Each project module and the project modules it imports."""
    modules = _modules()

    def module_of(name: str) -> str | None:
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in modules:
                return ".".join(parts[:end])
        return None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = {
            module_of(name)
            for node in ast.walk(tree)
            for name in _imported(node, module, path.name == "__init__.py")
        }
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected parts of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def climbs(
    graph: dict[str, set[str]], lower: tuple[str, ...], upper: tuple[str, ...]
) -> list[list[str]]:
    """The import paths from modules of packages ``lower`` to modules of packages ``upper``.

    The shortest path to each ``upper`` module reached, through any module
    in between (breadth first from every ``lower`` module at once), sorted;
    empty when ``lower`` reaches nothing of ``upper``.
    """
    came_from: dict[str, str | None] = {m: None for m in sorted(graph) if _within(m, lower)}
    queue = deque(came_from)
    reached = []
    while queue:
        module = queue.popleft()
        if _within(module, upper):
            reached.append(module)
            continue
        for target in sorted(graph.get(module, ())):
            if target not in came_from:
                came_from[target] = module
                queue.append(target)
    paths = []
    for module in reached:
        path: list[str] = []
        step: str | None = module
        while step is not None:
            path.append(step)
            step = came_from[step]
        paths.append(path[::-1])
    return sorted(paths)


@dataclass
class CallPath:
    """What :func:`call_path` saw."""

    #: The core functions called straight from the adapter's frames, in call order.
    entries: list[str] = field(default_factory=list)
    #: Adapter functions called while a core frame was on the stack (climbing back).
    climbs: list[str] = field(default_factory=list)


def _name(frame: FrameType) -> str:
    return f"{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_qualname}"


def call_path(run: Callable[[], Any], adapter: str, core: str = "connector") -> CallPath:
    """Runs ``run()`` and records its path between package ``core`` and package ``adapter``.

    Threads started while ``run()`` runs are followed too (an adapter may
    make its calls on a thread of its own).
    """
    seen = CallPath()

    def within(frame: FrameType | None, package: str) -> bool:
        module = frame.f_globals.get("__name__", "") if frame is not None else ""
        return module == package or module.startswith(package + ".")

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        if within(frame, core) and within(frame.f_back, adapter):
            seen.entries.append(_name(frame))
        elif within(frame, adapter):
            below = frame.f_back
            while below is not None:
                if within(below, core):
                    seen.climbs.append(_name(frame))
                    break
                below = below.f_back

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return seen
