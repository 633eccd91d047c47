from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TruncateStreamRequest(_message.Message):
    __slots__ = ("scope", "stream", "cut")
    class CutEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    cut: _containers.ScalarMap[int, int]
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ..., cut: _Optional[_Mapping[int, int]] = ...) -> None: ...

class TruncateStreamResponse(_message.Message):
    __slots__ = ("removed_segments", "bytes_freed")
    REMOVED_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FREED_FIELD_NUMBER: _ClassVar[int]
    removed_segments: _containers.RepeatedScalarFieldContainer[str]
    bytes_freed: int
    def __init__(self, removed_segments: _Optional[_Iterable[str]] = ..., bytes_freed: _Optional[int] = ...) -> None: ...

class ListScopesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListScopesResponse(_message.Message):
    __slots__ = ("scopes",)
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    scopes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, scopes: _Optional[_Iterable[str]] = ...) -> None: ...

class ListStreamsRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class ListStreamsResponse(_message.Message):
    __slots__ = ("streams",)
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    streams: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, streams: _Optional[_Iterable[str]] = ...) -> None: ...

class ListStateKeysRequest(_message.Message):
    __slots__ = ("prefix",)
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    def __init__(self, prefix: _Optional[str] = ...) -> None: ...

class ListStateKeysResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, keys: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateScopeRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class CreateScopeResponse(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class CreateStreamRequest(_message.Message):
    __slots__ = ("scope", "stream", "segment_count")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    segment_count: int
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ..., segment_count: _Optional[int] = ...) -> None: ...

class DescribeStreamRequest(_message.Message):
    __slots__ = ("scope", "stream")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ...) -> None: ...

class ScaleStreamRequest(_message.Message):
    __slots__ = ("scope", "stream", "sealed_segments", "split_count")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SEALED_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    SPLIT_COUNT_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    sealed_segments: _containers.RepeatedScalarFieldContainer[int]
    split_count: int
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ..., sealed_segments: _Optional[_Iterable[int]] = ..., split_count: _Optional[int] = ...) -> None: ...

class SealStreamRequest(_message.Message):
    __slots__ = ("scope", "stream")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ...) -> None: ...

class DeleteStreamRequest(_message.Message):
    __slots__ = ("scope", "stream")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ...) -> None: ...

class DeleteStreamResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteScopeRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class DeleteScopeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SegmentDescription(_message.Message):
    __slots__ = ("segment", "key_low", "key_high", "epoch", "sealed", "creation_time", "predecessors", "successors")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    KEY_LOW_FIELD_NUMBER: _ClassVar[int]
    KEY_HIGH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIME_FIELD_NUMBER: _ClassVar[int]
    PREDECESSORS_FIELD_NUMBER: _ClassVar[int]
    SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    segment: str
    key_low: float
    key_high: float
    epoch: int
    sealed: bool
    creation_time: int
    predecessors: _containers.RepeatedScalarFieldContainer[str]
    successors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, segment: _Optional[str] = ..., key_low: _Optional[float] = ..., key_high: _Optional[float] = ..., epoch: _Optional[int] = ..., sealed: bool = ..., creation_time: _Optional[int] = ..., predecessors: _Optional[_Iterable[str]] = ..., successors: _Optional[_Iterable[str]] = ...) -> None: ...

class StreamDescription(_message.Message):
    __slots__ = ("scope", "stream", "epoch", "sealed", "segments")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    epoch: int
    sealed: bool
    segments: _containers.RepeatedCompositeFieldContainer[SegmentDescription]
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ..., epoch: _Optional[int] = ..., sealed: bool = ..., segments: _Optional[_Iterable[_Union[SegmentDescription, _Mapping]]] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("segment", "writer_id", "first_event_number", "events", "routing_keys", "discarded_from", "assertion", "joining")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_EVENT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    ROUTING_KEYS_FIELD_NUMBER: _ClassVar[int]
    DISCARDED_FROM_FIELD_NUMBER: _ClassVar[int]
    ASSERTION_FIELD_NUMBER: _ClassVar[int]
    JOINING_FIELD_NUMBER: _ClassVar[int]
    segment: str
    writer_id: str
    first_event_number: int
    events: _containers.RepeatedScalarFieldContainer[bytes]
    routing_keys: _containers.RepeatedScalarFieldContainer[str]
    discarded_from: int
    assertion: AppendAssertion
    joining: AppendAssertion
    def __init__(self, segment: _Optional[str] = ..., writer_id: _Optional[str] = ..., first_event_number: _Optional[int] = ..., events: _Optional[_Iterable[bytes]] = ..., routing_keys: _Optional[_Iterable[str]] = ..., discarded_from: _Optional[int] = ..., assertion: _Optional[_Union[AppendAssertion, _Mapping]] = ..., joining: _Optional[_Union[AppendAssertion, _Mapping]] = ...) -> None: ...

class AppendAssertion(_message.Message):
    __slots__ = ("number", "event_time")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    number: int
    event_time: int
    def __init__(self, number: _Optional[int] = ..., event_time: _Optional[int] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("write_offset", "ingestion_time", "appended", "duplicates", "assertion_stored", "assertion_segments", "joining_stored", "joining_segments")
    WRITE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    INGESTION_TIME_FIELD_NUMBER: _ClassVar[int]
    APPENDED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    ASSERTION_STORED_FIELD_NUMBER: _ClassVar[int]
    ASSERTION_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    JOINING_STORED_FIELD_NUMBER: _ClassVar[int]
    JOINING_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    write_offset: int
    ingestion_time: int
    appended: int
    duplicates: int
    assertion_stored: bool
    assertion_segments: _containers.RepeatedScalarFieldContainer[str]
    joining_stored: bool
    joining_segments: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, write_offset: _Optional[int] = ..., ingestion_time: _Optional[int] = ..., appended: _Optional[int] = ..., duplicates: _Optional[int] = ..., assertion_stored: bool = ..., assertion_segments: _Optional[_Iterable[str]] = ..., joining_stored: bool = ..., joining_segments: _Optional[_Iterable[str]] = ...) -> None: ...

class AssertWatermarkRequest(_message.Message):
    __slots__ = ("scope", "stream", "writer_id", "number", "event_time", "fences")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCES_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    writer_id: str
    number: int
    event_time: int
    fences: _containers.RepeatedCompositeFieldContainer[WriterFence]
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ..., writer_id: _Optional[str] = ..., number: _Optional[int] = ..., event_time: _Optional[int] = ..., fences: _Optional[_Iterable[_Union[WriterFence, _Mapping]]] = ...) -> None: ...

class WriterFence(_message.Message):
    __slots__ = ("segment", "discarded_from", "next_event_number")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    DISCARDED_FROM_FIELD_NUMBER: _ClassVar[int]
    NEXT_EVENT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    segment: str
    discarded_from: int
    next_event_number: int
    def __init__(self, segment: _Optional[str] = ..., discarded_from: _Optional[int] = ..., next_event_number: _Optional[int] = ...) -> None: ...

class AssertWatermarkResponse(_message.Message):
    __slots__ = ("stored", "segments")
    STORED_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    stored: bool
    segments: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, stored: bool = ..., segments: _Optional[_Iterable[str]] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("segment", "offset", "max_bytes", "wait_ms", "known_watermark", "has_known_watermark")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    HAS_KNOWN_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    segment: str
    offset: int
    max_bytes: int
    wait_ms: int
    known_watermark: int
    has_known_watermark: bool
    def __init__(self, segment: _Optional[str] = ..., offset: _Optional[int] = ..., max_bytes: _Optional[int] = ..., wait_ms: _Optional[int] = ..., known_watermark: _Optional[int] = ..., has_known_watermark: bool = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("segment", "offset", "next_offset", "data", "watermark", "end_of_segment", "successors", "event_time_watermark", "event_time_floor", "data_crc32")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    END_OF_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FLOOR_FIELD_NUMBER: _ClassVar[int]
    DATA_CRC32_FIELD_NUMBER: _ClassVar[int]
    segment: str
    offset: int
    next_offset: int
    data: bytes
    watermark: int
    end_of_segment: bool
    successors: _containers.RepeatedScalarFieldContainer[str]
    event_time_watermark: int
    event_time_floor: int
    data_crc32: int
    def __init__(self, segment: _Optional[str] = ..., offset: _Optional[int] = ..., next_offset: _Optional[int] = ..., data: _Optional[bytes] = ..., watermark: _Optional[int] = ..., end_of_segment: bool = ..., successors: _Optional[_Iterable[str]] = ..., event_time_watermark: _Optional[int] = ..., event_time_floor: _Optional[int] = ..., data_crc32: _Optional[int] = ...) -> None: ...

class SegmentInfoRequest(_message.Message):
    __slots__ = ("segment",)
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    segment: str
    def __init__(self, segment: _Optional[str] = ...) -> None: ...

class SegmentInfo(_message.Message):
    __slots__ = ("segment", "creation_time", "last_write_time", "write_offset", "sealed", "watermark", "key_low", "key_high", "first_offset", "event_time_watermark", "writers")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_WRITE_TIME_FIELD_NUMBER: _ClassVar[int]
    WRITE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    KEY_LOW_FIELD_NUMBER: _ClassVar[int]
    KEY_HIGH_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    WRITERS_FIELD_NUMBER: _ClassVar[int]
    segment: str
    creation_time: int
    last_write_time: int
    write_offset: int
    sealed: bool
    watermark: int
    key_low: float
    key_high: float
    first_offset: int
    event_time_watermark: int
    writers: _containers.RepeatedCompositeFieldContainer[WriterAssertion]
    def __init__(self, segment: _Optional[str] = ..., creation_time: _Optional[int] = ..., last_write_time: _Optional[int] = ..., write_offset: _Optional[int] = ..., sealed: bool = ..., watermark: _Optional[int] = ..., key_low: _Optional[float] = ..., key_high: _Optional[float] = ..., first_offset: _Optional[int] = ..., event_time_watermark: _Optional[int] = ..., writers: _Optional[_Iterable[_Union[WriterAssertion, _Mapping]]] = ...) -> None: ...

class WriterAssertion(_message.Message):
    __slots__ = ("writer_id", "event_time", "last_seen")
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    writer_id: str
    event_time: int
    last_seen: int
    def __init__(self, writer_id: _Optional[str] = ..., event_time: _Optional[int] = ..., last_seen: _Optional[int] = ...) -> None: ...

class GetStateRequest(_message.Message):
    __slots__ = ("key", "known_revision")
    KEY_FIELD_NUMBER: _ClassVar[int]
    KNOWN_REVISION_FIELD_NUMBER: _ClassVar[int]
    key: str
    known_revision: int
    def __init__(self, key: _Optional[str] = ..., known_revision: _Optional[int] = ...) -> None: ...

class StateValue(_message.Message):
    __slots__ = ("key", "value", "revision", "server_time", "unchanged")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    revision: int
    server_time: int
    unchanged: bool
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., revision: _Optional[int] = ..., server_time: _Optional[int] = ..., unchanged: bool = ...) -> None: ...

class CompareAndSetStateRequest(_message.Message):
    __slots__ = ("key", "expected_revision", "value", "omit_written_value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    OMIT_WRITTEN_VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    expected_revision: int
    value: bytes
    omit_written_value: bool
    def __init__(self, key: _Optional[str] = ..., expected_revision: _Optional[int] = ..., value: _Optional[bytes] = ..., omit_written_value: bool = ...) -> None: ...

class CompareAndSetStateResponse(_message.Message):
    __slots__ = ("written", "current")
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    written: bool
    current: StateValue
    def __init__(self, written: bool = ..., current: _Optional[_Union[StateValue, _Mapping]] = ...) -> None: ...

class DeleteStateRequest(_message.Message):
    __slots__ = ("key", "expected_revision")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    key: str
    expected_revision: int
    def __init__(self, key: _Optional[str] = ..., expected_revision: _Optional[int] = ...) -> None: ...

class DeleteStateResponse(_message.Message):
    __slots__ = ("deleted", "current")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    current: StateValue
    def __init__(self, deleted: bool = ..., current: _Optional[_Union[StateValue, _Mapping]] = ...) -> None: ...

class PlanReadRequest(_message.Message):
    __slots__ = ("segment", "offset", "max_events", "max_bytes", "before_time", "work_buckets")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TIME_FIELD_NUMBER: _ClassVar[int]
    WORK_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    segment: str
    offset: int
    max_events: int
    max_bytes: int
    before_time: int
    work_buckets: int
    def __init__(self, segment: _Optional[str] = ..., offset: _Optional[int] = ..., max_events: _Optional[int] = ..., max_bytes: _Optional[int] = ..., before_time: _Optional[int] = ..., work_buckets: _Optional[int] = ...) -> None: ...

class PlanReadResponse(_message.Message):
    __slots__ = ("segment", "offset", "next_offset", "events", "watermark", "end_of_segment", "at_tail", "successors", "event_time_watermark", "first_ingestion_time", "work")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    END_OF_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    AT_TAIL_FIELD_NUMBER: _ClassVar[int]
    SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    FIRST_INGESTION_TIME_FIELD_NUMBER: _ClassVar[int]
    WORK_FIELD_NUMBER: _ClassVar[int]
    segment: str
    offset: int
    next_offset: int
    events: int
    watermark: int
    end_of_segment: bool
    at_tail: bool
    successors: _containers.RepeatedScalarFieldContainer[str]
    event_time_watermark: int
    first_ingestion_time: int
    work: UnreadWork
    def __init__(self, segment: _Optional[str] = ..., offset: _Optional[int] = ..., next_offset: _Optional[int] = ..., events: _Optional[int] = ..., watermark: _Optional[int] = ..., end_of_segment: bool = ..., at_tail: bool = ..., successors: _Optional[_Iterable[str]] = ..., event_time_watermark: _Optional[int] = ..., first_ingestion_time: _Optional[int] = ..., work: _Optional[_Union[UnreadWork, _Mapping]] = ...) -> None: ...

class TimeCount(_message.Message):
    __slots__ = ("time", "count")
    TIME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    time: int
    count: int
    def __init__(self, time: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class UnreadWork(_message.Message):
    __slots__ = ("unread", "writers", "tail_watermark")
    UNREAD_FIELD_NUMBER: _ClassVar[int]
    WRITERS_FIELD_NUMBER: _ClassVar[int]
    TAIL_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    unread: _containers.RepeatedCompositeFieldContainer[TimeCount]
    writers: _containers.RepeatedCompositeFieldContainer[TimeCount]
    tail_watermark: int
    def __init__(self, unread: _Optional[_Iterable[_Union[TimeCount, _Mapping]]] = ..., writers: _Optional[_Iterable[_Union[TimeCount, _Mapping]]] = ..., tail_watermark: _Optional[int] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("code", "message", "details")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    details: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DescribeTailsRequest(_message.Message):
    __slots__ = ("streams", "wait_ms")
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    streams: _containers.RepeatedCompositeFieldContainer[KnownTails]
    wait_ms: int
    def __init__(self, streams: _Optional[_Iterable[_Union[KnownTails, _Mapping]]] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class KnownTails(_message.Message):
    __slots__ = ("scope", "stream", "incarnation", "version")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    incarnation: int
    version: int
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ..., incarnation: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class DescribeTailsResponse(_message.Message):
    __slots__ = ("streams",)
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    streams: _containers.RepeatedCompositeFieldContainer[StreamTails]
    def __init__(self, streams: _Optional[_Iterable[_Union[StreamTails, _Mapping]]] = ...) -> None: ...

class StreamTails(_message.Message):
    __slots__ = ("scope", "stream", "incarnation", "version", "complete", "segments", "error", "server_time")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_FIELD_NUMBER: _ClassVar[int]
    scope: str
    stream: str
    incarnation: int
    version: int
    complete: bool
    segments: _containers.RepeatedCompositeFieldContainer[SegmentTail]
    error: Failure
    server_time: int
    def __init__(self, scope: _Optional[str] = ..., stream: _Optional[str] = ..., incarnation: _Optional[int] = ..., version: _Optional[int] = ..., complete: bool = ..., segments: _Optional[_Iterable[_Union[SegmentTail, _Mapping]]] = ..., error: _Optional[_Union[Failure, _Mapping]] = ..., server_time: _Optional[int] = ...) -> None: ...

class SegmentTail(_message.Message):
    __slots__ = ("segment", "version", "write_offset", "first_offset", "watermark", "event_time_watermark", "sealed", "last_write_time", "creation_time", "key_low", "key_high", "epoch", "predecessors", "successors")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WRITE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    LAST_WRITE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIME_FIELD_NUMBER: _ClassVar[int]
    KEY_LOW_FIELD_NUMBER: _ClassVar[int]
    KEY_HIGH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREDECESSORS_FIELD_NUMBER: _ClassVar[int]
    SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    segment: str
    version: int
    write_offset: int
    first_offset: int
    watermark: int
    event_time_watermark: int
    sealed: bool
    last_write_time: int
    creation_time: int
    key_low: float
    key_high: float
    epoch: int
    predecessors: _containers.RepeatedScalarFieldContainer[str]
    successors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, segment: _Optional[str] = ..., version: _Optional[int] = ..., write_offset: _Optional[int] = ..., first_offset: _Optional[int] = ..., watermark: _Optional[int] = ..., event_time_watermark: _Optional[int] = ..., sealed: bool = ..., last_write_time: _Optional[int] = ..., creation_time: _Optional[int] = ..., key_low: _Optional[float] = ..., key_high: _Optional[float] = ..., epoch: _Optional[int] = ..., predecessors: _Optional[_Iterable[str]] = ..., successors: _Optional[_Iterable[str]] = ...) -> None: ...

class ReadSegmentsRequest(_message.Message):
    __slots__ = ("session_id", "session_epoch", "cursors", "released", "max_bytes", "max_bytes_per_segment", "wait_ms", "close")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURSORS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_PER_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    session_epoch: int
    cursors: _containers.RepeatedCompositeFieldContainer[Cursor]
    released: _containers.RepeatedScalarFieldContainer[str]
    max_bytes: int
    max_bytes_per_segment: int
    wait_ms: int
    close: bool
    def __init__(self, session_id: _Optional[int] = ..., session_epoch: _Optional[int] = ..., cursors: _Optional[_Iterable[_Union[Cursor, _Mapping]]] = ..., released: _Optional[_Iterable[str]] = ..., max_bytes: _Optional[int] = ..., max_bytes_per_segment: _Optional[int] = ..., wait_ms: _Optional[int] = ..., close: bool = ...) -> None: ...

class Cursor(_message.Message):
    __slots__ = ("segment", "offset", "known_watermark", "known_event_time_watermark")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    KNOWN_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    KNOWN_EVENT_TIME_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    segment: str
    offset: int
    known_watermark: int
    known_event_time_watermark: int
    def __init__(self, segment: _Optional[str] = ..., offset: _Optional[int] = ..., known_watermark: _Optional[int] = ..., known_event_time_watermark: _Optional[int] = ...) -> None: ...

class ReadSegmentsResponse(_message.Message):
    __slots__ = ("session_id", "session_epoch", "reads", "failures")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    READS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    session_epoch: int
    reads: _containers.RepeatedCompositeFieldContainer[ReadResponse]
    failures: _containers.RepeatedCompositeFieldContainer[SegmentFailure]
    def __init__(self, session_id: _Optional[int] = ..., session_epoch: _Optional[int] = ..., reads: _Optional[_Iterable[_Union[ReadResponse, _Mapping]]] = ..., failures: _Optional[_Iterable[_Union[SegmentFailure, _Mapping]]] = ...) -> None: ...

class SegmentFailure(_message.Message):
    __slots__ = ("segment", "error")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    segment: str
    error: Failure
    def __init__(self, segment: _Optional[str] = ..., error: _Optional[_Union[Failure, _Mapping]] = ...) -> None: ...

class PlanReadsRequest(_message.Message):
    __slots__ = ("plans",)
    PLANS_FIELD_NUMBER: _ClassVar[int]
    plans: _containers.RepeatedCompositeFieldContainer[PlanReadRequest]
    def __init__(self, plans: _Optional[_Iterable[_Union[PlanReadRequest, _Mapping]]] = ...) -> None: ...

class PlanReadsResponse(_message.Message):
    __slots__ = ("plans",)
    PLANS_FIELD_NUMBER: _ClassVar[int]
    plans: _containers.RepeatedCompositeFieldContainer[PlanReadOutcome]
    def __init__(self, plans: _Optional[_Iterable[_Union[PlanReadOutcome, _Mapping]]] = ...) -> None: ...

class PlanReadOutcome(_message.Message):
    __slots__ = ("plan", "error")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    plan: PlanReadResponse
    error: Failure
    def __init__(self, plan: _Optional[_Union[PlanReadResponse, _Mapping]] = ..., error: _Optional[_Union[Failure, _Mapping]] = ...) -> None: ...
