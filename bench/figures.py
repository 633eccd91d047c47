"""What a benchmark returns: its figures, and the targets they are held to, as values.

A benchmark's ``measure(args)`` returns a frozen dataclass of its own (its
*figures*): the numbers it measured and the settings it ran with, as
attributes, with derived figures (ratios, medians) as properties; no prose.
The template of its RESULTS.md section reads those attributes by name. Every
figures value also has the two attributes of :class:`Figures`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bench._support import percentile

__all__ = ["Figures", "Percentiles", "Target"]

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}
#: What ``{target}`` reads when met, missed, and not measured.
_WORDS = ("met", "missed", "not measured")


@dataclass(frozen=True)
class Target:
    """A figure held to a bound: met when ``value OP bound`` holds.

    ``value`` or ``bound`` None (the figure, or the peer it is compared with,
    was not measured): neither met nor missed, ``met`` is None. In a template
    ``{t}`` reads ``met`` or ``missed`` (``not measured``), and
    ``{t:WORD|WORD|WORD}`` gives the words for met, missed and not measured:
    ``{targets[append]:met|MISSED|not measured}``. ``unit`` is for the console.
    """

    value: float | None
    op: str
    bound: float | None
    unit: str = ""

    def __post_init__(self) -> None:
        if self.op not in _COMPARE:
            msg = f"op {self.op!r} is not one of {', '.join(_COMPARE)}"
            raise ValueError(msg)

    @property
    def met(self) -> bool | None:
        """Whether ``value OP bound`` holds; None when either is not known."""
        if self.value is None or self.bound is None:
            return None
        return _COMPARE[self.op](self.value, self.bound)

    def __format__(self, spec: str) -> str:
        words = spec.split("|") if spec else []
        if len(words) > len(_WORDS):
            msg = f"target format {spec!r}: at most {len(_WORDS)} words, for {'|'.join(_WORDS)}"
            raise ValueError(msg)
        met, missed, unknown = words + list(_WORDS[len(words) :])
        return unknown if self.met is None else met if self.met else missed

    def __str__(self) -> str:
        """``123,456 events/s >= 150,000 events/s: missed``, for the console."""

        def shown(number: float | None) -> str:
            if number is None:
                return "?"
            text = f"{number:,.0f}" if abs(number) >= 100 else f"{number:.3g}"
            return f"{text} {self.unit}".rstrip()

        return f"{shown(self.value)} {self.op} {shown(self.bound)}: {self}"


class Percentiles:
    """Latencies' figures: how many were measured, p50, p99 and the longest, in ms.

    A base for a frozen dataclass whose ``values_ms`` (a field or a property)
    holds latencies in milliseconds. Percentiles by the nearest rank; each
    figure is NaN when nothing was measured.
    """

    values_ms: Sequence[float]

    @property
    def measured(self) -> int:
        """Latencies measured."""
        return len(self.values_ms)

    @property
    def p50(self) -> float:
        """The median, ms."""
        return percentile(self.values_ms, 50)

    @property
    def p99(self) -> float:
        """The 99th percentile, ms."""
        return percentile(self.values_ms, 99)

    @property
    def highest(self) -> float:
        """The longest, ms."""
        return max(self.values_ms, default=float("nan"))


class Figures(Protocol):
    """What every benchmark's figures have, beside its own attributes."""

    @property
    def software(self) -> Sequence[str]:
        """The versions the section names after the machine (``grpcio 1.76.0``), in order."""
        ...

    @property
    def targets(self) -> Mapping[str, Target]:
        """The targets, by name (``{targets[NAME]}`` in the template); empty when none."""
        ...
