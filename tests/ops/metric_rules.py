"""Prometheus's naming conventions, as one check over a scrape (written once, for every metric).

From https://prometheus.io/docs/practices/naming/ and the exposition format:
base units only (``_seconds``, ``_bytes``; a point in time is
``_timestamp_seconds`` since the epoch), a counter's samples end in
``_total``, no ``_created`` series, snake_case names and labels, a help text
on every family, and the server's own metrics prefixed ``tidemark_``. A
value under a ``_timestamp_seconds`` name must look like seconds, not
milliseconds.
"""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["naming_violations"]

#: Families the client library's own collectors add (they follow the conventions too).
_FOREIGN_PREFIXES = ("process_", "python_")
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
#: Units that are not base units, as words of a name.
_NOT_BASE_UNITS = re.compile(
    r"(^|_)(ms|msec|millis|milliseconds|us|micros|microseconds|ns|nanoseconds|minutes|hours|"
    r"days|kb|mb|gb|kib|mib|gib|kilobytes|megabytes|gigabytes|percent)(_|$)"
)
#: A timestamp in seconds since the epoch stays below this until the year 5138.
_LATEST_SECONDS = 1e11


def naming_violations(exposition: str) -> list[str]:
    """Every way the metrics in ``exposition`` (a ``/metrics`` body) break the conventions."""
    found: list[str] = []
    for family in text_string_to_metric_families(exposition):
        name = family.name
        if not name.startswith(("tidemark_", *_FOREIGN_PREFIXES)):
            found.append(f"{name}: not prefixed tidemark_")
        if not _SNAKE.match(name):
            found.append(f"{name}: not snake_case")
        if not family.documentation.strip():
            found.append(f"{name}: no help text")
        if _NOT_BASE_UNITS.search(name):
            found.append(f"{name}: a unit other than a base unit (seconds, bytes)")
        if "timestamp" in name and not name.endswith("_timestamp_seconds"):
            found.append(f"{name}: a timestamp is _timestamp_seconds")
        if "watermark" in name and not name.endswith(
            ("_timestamp_seconds", "_delay_seconds", "_info")
        ):
            found.append(
                f"{name}: a watermark is a _timestamp_seconds, its delay _delay_seconds "
                "(what holds it an _info)"
            )
        if "lag" in name.split("_") and not name.endswith(("_seconds", "_events", "_bytes")):
            found.append(f"{name}: a lag is in _seconds (or counted in _events, _bytes)")
        if family.type != "counter" and name.endswith("_total"):
            found.append(f"{name}: only a counter ends in _total")
        for sample in family.samples:
            found += _sample_violations(family.type, name, sample)
    return sorted(set(found))


def _sample_violations(kind: str, family: str, sample: object) -> list[str]:
    name: str = sample.name  # type: ignore[attr-defined]
    labels: dict[str, str] = sample.labels  # type: ignore[attr-defined]
    value: float = sample.value  # type: ignore[attr-defined]
    found = []
    if name.endswith("_created"):
        found.append(f"{name}: a _created series (disable_created_metrics)")
    if kind == "counter" and not name.endswith("_total"):
        found.append(f"{name}: a counter's sample ends in _total")
    for label in labels:
        if label != "le" and not _SNAKE.match(label):
            found.append(f"{family}: label {label!r} is not snake_case")
    if name.endswith("_timestamp_seconds") and value > _LATEST_SECONDS:
        found.append(f"{name}: {value} is milliseconds, not seconds")
    return found
