"""tumbling_window_count's pre-aggregation counts exactly as counting event by event.

The window count collapses each Arrow batch to one row per key and window
before its per-key function; these tests hold it to a count made one event
at a time: the pure collapse on one batch, and the whole query on a
scripted history with late events and events with no time.
"""

from __future__ import annotations

import collections
import pathlib
import random
from typing import Any

import pyarrow as pa
import pytest

from spark_adapter import tumbling_window_count, with_connector_watermark
from spark_adapter.schema import WATERMARK
from spark_adapter.windows import _ET_MS, _EVENTS, _WINDOW_START_MS, collapse_to_windows

from .test_spark_event_time import S, run_collecting, scripted

SIZE = 10 * S


def test_collapse_to_windows_counts_every_event_in_its_key_and_window() -> None:
    keys = ["a", "b", None, "a", "a", "b", None, "a", "a"]
    times = [1_500, 9_999, 3, 10_000, None, None, None, -1, 19_999]
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(keys),
            pa.nulls(len(keys), pa.timestamp("us", tz="UTC")),
            pa.array(times, pa.int64()),
        ],
        names=["routing_key", WATERMARK, _ET_MS],
    )
    collapsed = collapse_to_windows(batch, SIZE, "routing_key").to_pylist()

    one_by_one = collections.Counter(
        (key, None if t is None else (t // SIZE) * SIZE) for key, t in zip(keys, times, strict=True)
    )
    assert {(r["routing_key"], r[_WINDOW_START_MS]): r[_EVENTS] for r in collapsed} == one_by_one
    assert len(collapsed) == len(one_by_one)  # one row per key and window
    assert all(r[WATERMARK] is None for r in collapsed)
    assert collapsed[0].keys() == {"routing_key", WATERMARK, _WINDOW_START_MS, _EVENTS}


def _history(seed: int) -> list[tuple[int, list[tuple[str, str, int | None]]]]:
    """Scripted batches: many events per key and window, some late, some with no time."""
    rng = random.Random(seed)
    batches = []
    for i, watermark in enumerate([0, 12 * S, 25 * S, 25 * S, 41 * S, 60 * S]):
        events: list[tuple[str, str, int | None]] = []
        for n in range(40):
            key = rng.choice(["k1", "k2", "k3"])
            roll = rng.random()
            if roll < 0.1:
                at = None  # no event time
            elif roll < 0.3:
                at = rng.randrange(0, max(1, watermark))  # at or below the watermark: maybe late
            else:
                at = watermark + rng.randrange(1, 20 * S)
            events.append((key, f"e{i}.{n}", at))
        batches.append((watermark, events))
    return batches


def _counted_one_by_one(
    batches: list[tuple[int, list[tuple[str, str, int | None]]]],
) -> list[tuple[int, str, int | None, int, bool]]:
    """The docstring's rules, applied one event at a time: (batch, key, start, count, late).

    Spark's watermark ``W`` of micro-batch ``i`` is the highest connector
    watermark of the batches before (0 for the first); a last micro-batch
    without data runs at the final watermark.
    """
    rows: list[tuple[int, str, int | None, int, bool]] = []
    open_windows: dict[tuple[str, int], int] = collections.defaultdict(int)
    watermark = 0
    steps = [*batches, (batches[-1][0], [])]
    for batch_id, (connector_watermark, events) in enumerate(steps):
        late: dict[tuple[str, int | None], int] = collections.defaultdict(int)
        for key, _, at in events:
            start = None if at is None else (at // SIZE) * SIZE
            if start is None or start + SIZE <= watermark:
                late[(key, start)] += 1
            else:
                open_windows[(key, start)] += 1
        for (key, start), n in sorted(open_windows.items()):
            if start + SIZE <= watermark:
                rows.append((batch_id, key, start, n, False))
                del open_windows[(key, start)]
        rows += [(batch_id, key, start, n, True) for (key, start), n in late.items()]
        watermark = max(watermark, connector_watermark)
    return rows


@pytest.mark.slow
def test_tumbling_window_count_gives_the_rows_of_an_event_by_event_count(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    batches = _history(seed=26)
    expected = _counted_one_by_one(batches)
    assert any(late for *_, late in expected)
    assert any(start is None for _, _, start, _, _ in expected)

    counts = tumbling_window_count(
        with_connector_watermark(scripted(spark, *batches)), "10 seconds"
    )
    seen, _ = run_collecting(counts, tmp_path)

    def ms(t: Any) -> int | None:
        return None if t is None else round(t.timestamp() * 1000)

    rows = [
        (batch, row["routing_key"], ms(row["window_start"]), row["count"], row["late"])
        for batch, row in seen
    ]
    assert sorted(rows, key=repr) == sorted(expected, key=repr)
    total = sum(len(events) for _, events in batches)
    closed_or_late = sum(n for *_, n, _ in expected)
    assert sum(n for *_, n, _ in rows) == closed_or_late <= total
