"""The store's answers as protocol messages."""

from __future__ import annotations

from connector._proto import store_pb2 as _pb
from connector.errors import TidemarkError
from connector.model import (
    PlannedRead,
    ReadResult,
    SegmentDescription,
    SegmentTail,
    StateValue,
    StreamDescription,
    StreamTails,
    UnreadWork,
)
from connector.server.status import error_metadata, shortened, status_of

__all__ = [
    "failure_message",
    "plan_message",
    "read_message",
    "segment_message",
    "state_message",
    "stream_message",
    "tails_message",
]


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
        key=value.key,
        value=value.value,
        revision=value.revision,
        server_time=value.server_time,
        unchanged=value.unchanged,
    )


def read_message(result: ReadResult) -> _pb.ReadResponse:
    """A read's result as a message."""
    return _pb.ReadResponse(
        segment=result.segment,
        offset=result.offset,
        next_offset=result.next_offset,
        data=result.data,
        watermark=result.watermark,
        end_of_segment=result.end_of_segment,
        successors=result.successors,
        event_time_watermark=result.event_time_watermark,
        event_time_floor=result.event_time_floor,
        data_crc32=result.checksum,
    )


def plan_message(plan: PlannedRead) -> _pb.PlanReadResponse:
    """A read plan as a message."""
    return _pb.PlanReadResponse(
        segment=plan.segment,
        offset=plan.offset,
        next_offset=plan.next_offset,
        events=plan.events,
        watermark=plan.watermark,
        end_of_segment=plan.end_of_segment,
        at_tail=plan.at_tail,
        successors=plan.successors,
        event_time_watermark=plan.event_time_watermark,
        work=None if plan.work is None else work_message(plan.work),
        first_ingestion_time=plan.first_ingestion_time,
    )


def work_message(work: UnreadWork) -> _pb.UnreadWork:
    """A segment's work as a message."""
    return _pb.UnreadWork(
        unread=[_pb.TimeCount(time=b.time, count=b.count) for b in work.unread],
        writers=[_pb.TimeCount(time=b.time, count=b.count) for b in work.writers],
        tail_watermark=work.tail_watermark,
    )


def failure_message(error: TidemarkError) -> _pb.Failure:
    """Why one item of a call of many failed: the status, message and metadata of its own call."""
    return _pb.Failure(
        code=status_of(error).value[0],
        message=shortened(str(error)),
        details=dict(error_metadata(error)),
    )


def tails_message(tails: StreamTails) -> _pb.StreamTails:
    """One stream's tails as a message."""
    return _pb.StreamTails(
        scope=tails.scope,
        stream=tails.stream,
        incarnation=tails.incarnation,
        version=tails.version,
        complete=tails.complete,
        segments=[_segment_tail(t) for t in tails.segments],
        server_time=tails.server_time,
    )


def _segment_tail(tail: SegmentTail) -> _pb.SegmentTail:
    return _pb.SegmentTail(
        segment=tail.segment,
        version=tail.version,
        write_offset=tail.write_offset,
        first_offset=tail.first_offset,
        watermark=tail.watermark,
        event_time_watermark=tail.event_time_watermark,
        sealed=tail.sealed,
        last_write_time=tail.last_write_time,
        creation_time=tail.creation_time,
        key_low=tail.key_low,
        key_high=tail.key_high,
        epoch=tail.epoch,
        predecessors=tail.predecessors,
        successors=tail.successors,
    )
