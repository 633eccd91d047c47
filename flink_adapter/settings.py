"""The checked settings of a Tidemark Flink source: the core's read spec and Flink's own knobs.

Frozen and picklable: PyFlink ships it to every Python worker inside the
coordinator and reader functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.reader.source import ReadSpec

__all__ = ["SourceSettings"]


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
    """

    spec: ReadSpec
    reader_group: str = "flink-reader"
    uid: str | None = None
    parallelism: int | None = None
    epoch_interval_ms: int = 100

    @property
    def uid_prefix(self) -> str:
        """The prefix of the source's operator uids."""
        return self.uid or f"tidemark-{self.reader_group}"
