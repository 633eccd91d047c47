"""The checked settings of a Tidemark Flink source: what the builder produces, plain values only.

Frozen and picklable: PyFlink ships it to every Python worker inside the
coordinator and reader functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.client.serializers import serializer_named
from connector.reader.events import TimeDomain
from connector.reader.planning import StartPosition
from connector.reader.timestamps import (
    FieldTimestampAssigner,
    IngestionTimeAssigner,
    TimestampAssigner,
    assigner_from_path,
)
from flink_adapter.epochs import (
    MAX_EPOCH_BYTES,
    MAX_EPOCH_EVENTS,
    MAX_TASK_BYTES,
    MAX_TASK_EVENTS,
)

__all__ = ["SourceSettings", "StreamSpec"]


@dataclass(frozen=True)
class StreamSpec:
    """One stream read: its name, where reading starts and, for a bounded read, where it ends."""

    name: str
    start: StartPosition
    end: StartPosition | None = None


@dataclass(frozen=True)
class SourceSettings:
    """Everything a built :class:`~flink_adapter.FlinkTidemarkReader` needs at run time.

    Attributes:
        uri: the store, credentials in its query (see ``connector.security``).
        streams: the streams read.
        deserializer: ``bytes``, ``string`` or ``json``.
        time_domain: PROCESSING_TIME (no watermarks) or INGESTION_TIME.
        timestamp_field: the JSON field holding event time, or None.
        timestamp_assigner: a ``module:function`` path, or None (with no field
            either, event time is ingestion time).
        max_event_time_lag_ms: subtracted from the group watermark.
        reader_group: names the source's state (and its Flink uids).
        uid: the uid prefix of the source's operators (defaults to the group's name).
        read_timeout_ms: how long one store call may take before it is retried.
        parallelism: reader subtasks.
        epoch_interval_ms: how often the coordinator plans (one epoch per tick).
        max_events_per_epoch / max_bytes_per_epoch: the budget of one epoch, None for none.
        max_events_per_task / max_bytes_per_task: the most one read task holds, None for
            no limit. A reader subtask hands a task's rows to Flink once the task is read,
            so smaller tasks mean steadier output and lower latency, larger ones fewer
            store calls.
    """

    uri: str
    streams: tuple[StreamSpec, ...]
    deserializer: str = "bytes"
    time_domain: TimeDomain = TimeDomain.PROCESSING_TIME
    timestamp_field: str | None = None
    timestamp_assigner: str | None = None
    max_event_time_lag_ms: int = 0
    reader_group: str = "flink-reader"
    uid: str | None = None
    read_timeout_ms: int = 60_000
    parallelism: int | None = None
    epoch_interval_ms: int = 100
    max_events_per_epoch: int | None = MAX_EPOCH_EVENTS
    max_bytes_per_epoch: int | None = MAX_EPOCH_BYTES
    max_events_per_task: int | None = MAX_TASK_EVENTS
    max_bytes_per_task: int | None = MAX_TASK_BYTES

    @property
    def stream_names(self) -> list[str]:
        """The streams' names, in the order given."""
        return [spec.name for spec in self.streams]

    @property
    def bounded(self) -> bool:
        """Whether every stream has an end: the source then finishes."""
        return all(spec.end is not None for spec in self.streams)

    @property
    def lag_ms(self) -> int | None:
        """The planner's lag: None in the processing-time domain (no watermarks at all)."""
        return self.max_event_time_lag_ms if self.time_domain is TimeDomain.INGESTION_TIME else None

    @property
    def uid_prefix(self) -> str:
        """The prefix of the source's operator uids."""
        return self.uid or f"tidemark-{self.reader_group}"

    def assigner(self) -> TimestampAssigner[object]:
        """The timestamp assigner these settings name."""
        if self.timestamp_field:
            return FieldTimestampAssigner(self.timestamp_field)
        if self.timestamp_assigner:
            return assigner_from_path(self.timestamp_assigner)
        return IngestionTimeAssigner()

    def serializer(self) -> object:
        """The deserializer these settings name."""
        return serializer_named(self.deserializer)
