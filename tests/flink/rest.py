"""Reading a running Flink job's metrics over the REST API, as monitoring does."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

from tests.readme import free_port

__all__ = ["free_port", "get", "metric"]


def get(port: int, path: str) -> Any:
    """The JSON answer of the REST API on ``port`` at ``path``."""
    with urllib.request.urlopen(f"http://localhost:{port}{path}", timeout=10) as answer:
        return json.load(answer)


def metric(port: int, job: str, vertex: str, name: str) -> list[float]:
    """Metric ``name`` of the task whose name starts with ``vertex``, a value per subtask.

    Empty until the job runs and its subtasks report it.
    """
    values: list[float] = []
    for task in get(port, f"/jobs/{job}")["vertices"]:
        if not task["name"].startswith(vertex):
            continue
        base = f"/jobs/{job}/vertices/{task['id']}"
        ids = [m["id"] for m in get(port, f"{base}/metrics") if m["id"].endswith(f".{name}")]
        if ids:
            query = urllib.parse.urlencode({"get": ",".join(sorted(ids))})
            values += [float(m["value"]) for m in get(port, f"{base}/metrics?{query}")]
    return values
