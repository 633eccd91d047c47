"""Plain holders standing in for a Flink function's keyed state and metrics in unit tests."""

from __future__ import annotations

from typing import Any

__all__ = ["Value"]


class Value:
    """Stands in for a Flink ``ValueState``, and for a gauge (``flink_adapter.metrics.Value``)."""

    def __init__(self, value: Any = None) -> None:
        self._value = value

    def value(self) -> Any:
        return self._value

    def update(self, value: Any) -> None:
        self._value = value

    def set(self, value: Any) -> None:
        """What a gauge is set to."""
        self._value = value
