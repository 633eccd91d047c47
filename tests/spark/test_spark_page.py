"""docs/spark.md's runnable blocks, run as written in the shared session against a real store.

The page reads the quickstart's stream; here a stream of the test's own on a
store with a synthetic clock holds readings of three sensors ten seconds
apart, each stamped with the clock, and the clock then moves past every
window. The page's Python blocks run in order in one namespace, with the
store's URI and the stream's name in place of the page's; then the frames
they define run as queries, and each gives what the readings say.
"""

from __future__ import annotations

import pathlib
from collections import Counter, defaultdict
from typing import Any

import pytest

from tests.docs.runnable import runnable_blocks
from tests.readme import DOCS, localized

from .conftest import BatchLog

pytestmark = pytest.mark.slow

_WINDOW_MS = 60_000
_LAG_MS = 5_000


def _run(frame: Any, checkpoint: pathlib.Path, mode: str) -> list[dict[str, Any]]:
    """The rows ``frame``'s query emits reading what is there (``availableNow``), in ``mode``."""
    log = BatchLog()
    query = (
        frame.writeStream.outputMode(mode)
        .foreachBatch(log)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(timeout=240)
    assert not query.isActive, "the query read what is there and stopped"
    if mode == "complete":
        return log.attempts[-1][1] if log.attempts else []
    return [row for _, rows in log.attempts for row in rows]


def test_the_spark_pages_blocks_run_as_written_and_their_frames_window_and_count_the_readings(
    spark: Any, synthetic_store: Any, tmp_path: pathlib.Path
) -> None:
    stream = synthetic_store.create_stream(segments=2)
    readings = []
    with synthetic_store.writer(stream) as writer:
        for n in range(12):
            now = synthetic_store.advance(10_000)
            reading = {"sensor": "ABC"[n % 3], "temp": 20.0 + n, "ts": now}
            writer.write_event(reading, routing_key=reading["sensor"])
            writer.flush()
            readings.append(reading)
    synthetic_store.advance(2 * _WINDOW_MS + _LAG_MS)  # the watermark passes every window

    blocks = [b.code for b in runnable_blocks(DOCS / "spark.md") if b.language == "python"]
    places = {"tidemark://127.0.0.1:7171": synthetic_store.uri, '"iot/sensors"': f'"{stream}"'}
    page = {"__name__": "spark_page"}
    exec(compile(localized("\n".join(blocks), places), "docs/spark.md", "exec"), page)  # noqa: S102
    assert page["spark"] is spark, "local_session() returns the session running"

    temps: dict[tuple[int, str], list[float]] = defaultdict(list)
    for r in readings:
        temps[(r["ts"] - r["ts"] % _WINDOW_MS, r["sensor"])].append(r["temp"])
    averaged = {
        (int(row["window"]["start"].timestamp() * 1000), row["sensor"]): row["avg(temp)"]
        for row in _run(page["averages"], tmp_path / "averages", "append")
    }
    assert averaged == {key: pytest.approx(sum(t) / len(t)) for key, t in temps.items()}

    counted = {
        row["routing_key"]: row["count"]
        for row in _run(page["per_sensor"], tmp_path / "counts", "complete")
    }
    assert counted == Counter(r["sensor"] for r in readings), "no NULL key: events only"
    assert _run(page["late"], tmp_path / "late", "append") == []
