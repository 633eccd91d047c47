"""A test-only streaming source that replays scripted micro-batches in the ``tidemark`` schema.

It stands in for the connector's reader (written elsewhere) in the tests of
the event-time helpers and of the sink: each trigger delivers the next
scripted batch, one Spark partition per batch. A batch is
``{"watermark": ms or null, "events": [[routing_key, event, event_time_ms], ...]}``;
each event row carries the batch's watermark, as the connector's rows do
(the watermark as of the end of the batch), and ``late`` under the highest
watermark of the batches before (the one in force), and a batch with a
watermark also has one ``kind = 'watermark'`` row, as the connector emits
one per batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from connector.reader.source.timekeeping import is_late
from spark_adapter.schema import tidemark_schema

__all__ = ["ScriptedSource", "script"]


def script(*batches: tuple[int | None, Sequence[tuple[str | None, str, int | None]]]) -> str:
    """The ``script`` option for ``(watermark_ms, [(key, event, event_time_ms), ...])`` batches."""
    return json.dumps(
        [{"watermark": wm, "events": [list(e) for e in events]} for wm, events in batches]
    )


def _time(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


class _Batch(InputPartition):
    def __init__(self, index: int, batch: dict[str, Any], in_force: int | None):
        super().__init__(index)
        self.index = index
        self.batch = batch
        self.in_force = in_force


class _ScriptedReader(DataSourceStreamReader):
    """Offsets are ``{"batch": n}``: the first ``n`` scripted batches were delivered."""

    def __init__(self, batches: list[dict[str, Any]]):
        self.batches = batches
        self.offered = 0

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        return {"batch": 0}

    def latestOffset(self) -> dict[str, int]:  # noqa: N802
        # One more batch per trigger, so each scripted batch is one micro-batch.
        self.offered = min(self.offered + 1, len(self.batches))
        return {"batch": self.offered}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[_Batch]:
        # A restarted query first re-runs its last logged batch: offer the next one after it.
        self.offered = max(self.offered, end["batch"])
        indexes = range(start["batch"], end["batch"])
        return [_Batch(i, self.batches[i], self._in_force(i)) for i in indexes]

    def _in_force(self, index: int) -> int | None:
        marks = [b["watermark"] for b in self.batches[:index] if b["watermark"] is not None]
        return max(marks, default=None)

    def read(self, partition: _Batch) -> Iterator[tuple[Any, ...]]:  # type: ignore[override]
        watermark = _time(partition.batch["watermark"])
        stream = f"scripted/batch-{partition.index}/0"
        in_force = partition.in_force
        for offset, (key, event, event_time) in enumerate(partition.batch["events"]):
            late = None if event_time is None else is_late(event_time, in_force)
            yield (
                key,
                event,
                _time(event_time),
                watermark,
                "event",
                stream,
                offset,
                _time(event_time),
                late,
            )
        if watermark is not None:
            yield (None, None, None, watermark, "watermark", None, None, None, None)

    def commit(self, end: dict[str, int]) -> None:
        pass


class ScriptedSource(DataSource):
    """Format ``tidemark_scripted``; option ``script`` (see :func:`script`)."""

    @classmethod
    def name(cls) -> str:
        return "tidemark_scripted"

    def schema(self) -> StructType:
        return tidemark_schema("string")

    def streamReader(self, schema: StructType) -> _ScriptedReader:  # noqa: N802
        return _ScriptedReader(json.loads(self.options["script"]))
