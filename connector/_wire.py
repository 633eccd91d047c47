"""Settings both ends of the gRPC connection share."""

from __future__ import annotations

import grpc

from connector.errors import (
    AlreadyExistsError,
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    StoreUnavailableError,
    TidemarkError,
    TruncatedError,
    UnauthenticatedError,
)

#: The largest message either end sends or accepts.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: The most data a read answers with over gRPC, whatever its ``max_bytes``: half the message
#: limit. A read returns at least one whole event, so the server also refuses to serve a
#: store whose ``max_event_size`` is larger than this.
MAX_READ_BYTES = MAX_MESSAGE_BYTES // 2

#: The most events one append may carry: a bigger batch would hold the store's sequencer,
#: and so every other writer, for seconds.
MAX_EVENTS_PER_APPEND = 100_000

#: The longest a call over many segments (DescribeTails, ReadSegments) waits when nothing is
#: new, whatever it asks: a parked call costs no thread, but a client that went away without
#: a word is found out at the latest then.
MAX_WAIT_MS = 30_000
#: The most items (streams, plans) one DescribeTails or PlanReads call names: the largest
#: stream's open segments, answered in about a second of one server thread at most.
MAX_ITEMS_PER_CALL = 16_384
#: ReadSegments' budgets: the data of one answer (by default, and at most: with the one whole
#: event its last segment may add, up to MAX_READ_BYTES more, an answer fits a message), one
#: segment's data by default, and how many segments one answer carries at most.
DEFAULT_FETCH_BYTES = 8 * 1024 * 1024
MAX_FETCH_BYTES = 16 * 1024 * 1024
DEFAULT_FETCH_BYTES_PER_SEGMENT = 1024 * 1024
MAX_READS_PER_ANSWER = 4_096

#: Channel and server options: batches of events can be large.
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]

#: Trailing metadata key naming the domain error class, so clients raise the same one.
ERROR_KIND_KEY = "tidemark-error"
#: With SegmentSealedError: the sealed segment, and its successors joined by commas.
SEALED_SEGMENT_KEY = f"{ERROR_KIND_KEY}-segment"
SUCCESSORS_KEY = f"{ERROR_KIND_KEY}-successors"
#: With TruncatedError: its first readable offset (the segment goes under SEALED_SEGMENT_KEY).
FIRST_OFFSET_KEY = f"{ERROR_KIND_KEY}-first-offset"
#: With ResourceExhaustedError: which limit the request met (its ``cause``).
CAUSE_KEY = f"{ERROR_KIND_KEY}-cause"
#: With DataLossError: the damaged offset and where its append ends (the segment
#: goes under SEALED_SEGMENT_KEY).
DAMAGED_OFFSET_KEY = f"{ERROR_KIND_KEY}-offset"
NEXT_OFFSET_KEY = f"{ERROR_KIND_KEY}-next-offset"

#: The health service's name for "no read met damaged data": SERVING until a read is
#: answered DATA_LOSS (not a gRPC service of its own; see connector.ops.data_loss).
DATA_SERVICE = "tidemark.v1.SegmentStore/data"

#: Each domain error and the gRPC status code it travels as, one table for both ways: the
#: server answers an error with the code of the first class it is an instance of (anything
#: else is INTERNAL); the client raises the class of the code it gets (others: TidemarkError).
ERROR_STATUS: tuple[tuple[type[TidemarkError], grpc.StatusCode], ...] = (
    (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (StoreUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (TruncatedError, grpc.StatusCode.OUT_OF_RANGE),
    (DataLossError, grpc.StatusCode.DATA_LOSS),
)
