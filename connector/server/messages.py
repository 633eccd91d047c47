"""The store's answers as protocol messages."""

from __future__ import annotations

from connector._proto import store_pb2 as _pb
from connector.model import SegmentDescription, StateValue, StreamDescription

__all__ = ["segment_message", "state_message", "stream_message"]


def stream_message(description: StreamDescription) -> _pb.StreamDescription:
    """A stream's description as a message."""
    return _pb.StreamDescription(
        scope=description.scope,
        stream=description.stream,
        epoch=description.epoch,
        sealed=description.sealed,
        segments=[segment_message(s) for s in description.segments],
    )


def segment_message(description: SegmentDescription) -> _pb.SegmentDescription:
    """A segment's description as a message."""
    return _pb.SegmentDescription(
        segment=description.segment,
        key_low=description.key_low,
        key_high=description.key_high,
        epoch=description.epoch,
        sealed=description.sealed,
        creation_time=description.creation_time,
        predecessors=description.predecessors,
        successors=description.successors,
    )


def state_message(value: StateValue) -> _pb.StateValue:
    """A state value as a message."""
    return _pb.StateValue(
        key=value.key, value=value.value, revision=value.revision, server_time=value.server_time
    )
