"""The checked settings of a Tidemark Flink source: the core's read spec and Flink's own knobs.

Frozen and picklable: PyFlink ships it to every Python worker inside the
coordinator and reader functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.reader.progress_watch import DEFAULT_STALL_LOG_AFTER_MS
from connector.reader.source import ReadSpec
from flink_adapter.json_fields import JsonFields

__all__ = ["EPOCH_INTERVAL_MS", "IDLE_WAIT_MS", "SourceSettings"]


#: How often the coordinator plans an epoch by default, ms (what it trades: the builder's
#: ``with_epoch_interval``).
EPOCH_INTERVAL_MS = 50
#: How long an epoch after one that found nothing new waits on the store for a change by
#: default, ms (the builder's ``with_idle_wait``; :mod:`flink_adapter.epoch_plans`).
IDLE_WAIT_MS = 250


@dataclass(frozen=True)
class SourceSettings:
    """Everything a built :class:`~flink_adapter.FlinkTidemarkReader` needs at run time.

    Attributes:
        spec: what is read (streams, store, time keeping, deserializer, the
            budget of an epoch, the size of a read task).
        reader_group: names the source's state (and its Flink uids).
        uid: the uid prefix of the source's operators (defaults to the group's name).
        parallelism: reader subtasks (None: the environment's).
        epoch_interval_ms: how often the coordinator plans (one epoch per tick).
        idle_wait_ms: how long an epoch after one that found nothing new
            waits on the store for a change (0: never), off Flink's mailbox
            thread (:mod:`flink_adapter.epoch_plans`).
        python_mode: the Python execution mode asked for (``thread`` or
            ``process``; None: the job's own setting, left as it is); see
            :mod:`flink_adapter.python_mode`.
        mode: the job's mode once the source was added (the functions
            check they run in it).
        json_fields: the declared JSON fields (name, SQL type), each a
            typed column of the rows (:mod:`flink_adapter.json_fields`).
        stall_log_after_ms: the coordinator logs what holds the watermark
            once per stall longer than this (0: never).
    """

    spec: ReadSpec
    reader_group: str = "flink-reader"
    uid: str | None = None
    parallelism: int | None = None
    epoch_interval_ms: int = EPOCH_INTERVAL_MS
    idle_wait_ms: int = IDLE_WAIT_MS
    python_mode: str | None = None
    mode: str = "process"
    json_fields: JsonFields = ()
    stall_log_after_ms: int = DEFAULT_STALL_LOG_AFTER_MS

    @property
    def uid_prefix(self) -> str:
        """The prefix of the source's operator uids."""
        return self.uid or f"tidemark-{self.reader_group}"

    @property
    def streams_label(self) -> str:
        """The streams read, for names people read (``iot/sensors, iot/alarms``)."""
        return ", ".join(self.spec.stream_names)

    @property
    def reader_name(self) -> str:
        """The reader operator's name in Flink's web UI and metrics."""
        return f"Tidemark source: {self.streams_label}"

    @property
    def coordinator_name(self) -> str:
        """The coordinator operator's name in Flink's web UI and metrics."""
        return f"Tidemark coordinator: {self.streams_label}"
