"""The reader core: events and watermarks, reader groups, event-time ordering.

Plain Python applications use it directly; the Flink and Spark adapters keep
its :class:`GroupState` in their own state and offsets, and plan and read
through its source (:mod:`connector.reader.source`).
"""

from connector.groups.record import GroupRecord
from connector.groups.state import GroupState, SegmentCursor, Successor, WaitingSegment
from connector.reader.events import END_OF_TIME, EventRead, Position, ReaderConfig, TimeDomain
from connector.reader.group import ReaderGroup, ReaderGroupManager, ReaderGroupResetError
from connector.reader.membership import GroupHandle
from connector.reader.ordering import EventTimeOrderer, Timestamped
from connector.reader.reader import EventReader
from connector.reader.source import Frontier, ReadSpec, SegmentRange, SourcePlanner, StreamCut
from connector.timestamps import (
    CallableTimestampAssigner,
    FieldTimestampAssigner,
    IngestionTimeAssigner,
    TimestampAssigner,
    assigner_from_path,
)

__all__ = [
    "END_OF_TIME",
    "CallableTimestampAssigner",
    "EventRead",
    "EventReader",
    "EventTimeOrderer",
    "FieldTimestampAssigner",
    "Frontier",
    "GroupHandle",
    "GroupRecord",
    "GroupState",
    "IngestionTimeAssigner",
    "Position",
    "ReaderConfig",
    "ReaderGroup",
    "ReaderGroupManager",
    "ReaderGroupResetError",
    "SegmentCursor",
    "ReadSpec",
    "SegmentRange",
    "SourcePlanner",
    "StreamCut",
    "Successor",
    "TimeDomain",
    "TimestampAssigner",
    "Timestamped",
    "WaitingSegment",
    "assigner_from_path",
]
