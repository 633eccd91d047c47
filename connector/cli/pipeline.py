"""The stages of a scope's pipeline with their watermarks, from the store: plain values.

Each stage's link (:class:`~connector.stages.StageLink`) is what its job
recorded; its times are read now (:func:`connector.stages.stage_times`):
the input watermark from its reader group's position when the store keeps
one, else from its input streams' asserted event time; the output
watermark from its writers' assertions on its output stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from connector.cli.watermarks import server_now
from connector.client import StoreClient
from connector.errors import NotFoundError
from connector.groups.record import GroupRecord, state_key
from connector.groups.state import group_event_time
from connector.model import SegmentInfo
from connector.names import StreamId
from connector.stages import StageTimes, chain_order, chains, read_stages, stage_times
from connector.stages.chain import FROM_GROUP, FROM_STREAMS

__all__ = ["PipelineReport", "pipeline"]


@dataclass(frozen=True)
class PipelineReport:
    """A scope's stages, upstream first, at the store's time ``now``; ``chains`` by name."""

    scope: str
    now: int
    stages: tuple[StageTimes, ...]
    chains: tuple[tuple[str, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-able values."""
        return {
            "scope": self.scope,
            "now": self.now,
            "chains": [list(c) for c in self.chains],
            "stages": [
                {
                    "stage": t.link.name,
                    "engine": t.link.engine,
                    "inputs": list(t.link.inputs),
                    "group": t.link.group,
                    "output": t.link.output,
                    "writer": t.link.writer + ("-*" if t.link.writer_is_prefix else ""),
                    "input_watermark": t.input_watermark,
                    "input_from": t.input_from,
                    "output_watermark": t.output_watermark,
                    "event_time_latency_ms": t.latency_ms,
                }
                for t in self.stages
            ],
        }


class _Streams:
    """The open segments of each stream asked about, read once per report."""

    def __init__(self, client: StoreClient):
        self._client = client
        self._open: dict[str, list[SegmentInfo]] = {}

    def open_segments(self, name: str) -> list[SegmentInfo]:
        """The stream's open segments (none for a stream that does not exist)."""
        if name not in self._open:
            stream = StreamId.parse(name)
            try:
                described = self._client.describe_stream(stream.scope, stream.stream)
            except NotFoundError:  # deleted since the stage recorded it
                self._open[name] = []
                return []
            self._open[name] = [
                self._client.segment_info(s.segment) for s in described.segments if not s.sealed
            ]
        return self._open[name]

    def event_time(self, names: tuple[str, ...]) -> int | None:
        """The least event time the streams' writers assert (None: no writer holds any)."""
        times = [
            info.event_time_watermark
            for name in names
            for info in self.open_segments(name)
            if info.event_time_watermark is not None
        ]
        return min(times, default=None)

    def assertions(self, name: str) -> list[tuple[str, int]]:
        """Every active writer's assertion on the stream's open segments."""
        return [(w.writer_id, w.event_time) for s in self.open_segments(name) for w in s.writers]


def _group_event_time(client: StoreClient, group: str) -> tuple[bool, int | None]:
    """Whether the store keeps ``group`` (``scope/group``), and its writers' event time."""
    scope, _, name = group.partition("/")
    stored = client.get_state(state_key(scope, name))
    if not stored.revision:
        return False, None
    return True, group_event_time(GroupRecord.from_json(stored.value).state)


def pipeline(client: StoreClient, scope: str) -> PipelineReport:
    """The stages recorded in ``scope`` with their watermarks now, upstream first.

    Raises:
        NotFoundError: the scope does not exist.
    """
    client.list_streams(scope)  # refuses a scope that does not exist, naming it
    links = read_stages(client, scope)
    now = server_now(client, scope)
    streams = _Streams(client)
    times = []
    for link in chain_order(links):
        kept, event_time = _group_event_time(client, link.group) if link.group else (False, None)
        if not kept:
            event_time = streams.event_time(link.inputs)
        source = FROM_GROUP if kept else FROM_STREAMS
        times.append(stage_times(link, event_time, source, streams.assertions(link.output)))
    named = tuple(tuple(s.name for s in path) for path in chains(links))
    return PipelineReport(scope, now, tuple(times), named)
