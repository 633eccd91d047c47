"""How a domain error travels to a client: its status code, metadata and message."""

from __future__ import annotations

import grpc

from connector._wire import (
    CAUSE_KEY,
    DAMAGED_OFFSET_KEY,
    ERROR_KIND_KEY,
    ERROR_STATUS,
    FIRST_OFFSET_KEY,
    NEXT_OFFSET_KEY,
    SEALED_SEGMENT_KEY,
    SUCCESSORS_KEY,
)
from connector.errors import (
    DataLossError,
    ResourceExhaustedError,
    SegmentSealedError,
    TidemarkError,
    TruncatedError,
)

__all__ = ["error_metadata", "shortened", "status_of"]

#: The longest message a status carries: gRPC sends it in the trailers, whose size is limited.
_MAX_MESSAGE_CHARS = 1_000


def status_of(error: TidemarkError) -> grpc.StatusCode:
    """The gRPC status code a domain error is reported with."""
    for error_type, code in ERROR_STATUS:
        if isinstance(error, error_type):
            return code
    return grpc.StatusCode.INTERNAL


def error_metadata(error: TidemarkError) -> tuple[tuple[str, str], ...]:
    """The trailing metadata that lets a client raise the same error with the same fields.

    Every error sends its class name; a SegmentSealedError also sends its
    segment and successors (comma-separated), a TruncatedError its segment
    and first readable offset, a ResourceExhaustedError its cause, a
    DataLossError its segment, the damaged offset and where its append ends.
    """
    metadata = ((ERROR_KIND_KEY, type(error).__name__),)
    if isinstance(error, SegmentSealedError):
        metadata += (
            (SEALED_SEGMENT_KEY, error.segment),
            (SUCCESSORS_KEY, ",".join(error.successors)),
        )
    if isinstance(error, TruncatedError):
        metadata += (
            (SEALED_SEGMENT_KEY, error.segment),
            (FIRST_OFFSET_KEY, str(error.first_offset)),
        )
    if isinstance(error, ResourceExhaustedError):
        metadata += ((CAUSE_KEY, error.cause),)
    if isinstance(error, DataLossError):
        metadata += (
            (SEALED_SEGMENT_KEY, error.segment),
            (DAMAGED_OFFSET_KEY, str(error.offset)),
            (NEXT_OFFSET_KEY, str(error.next_offset)),
        )
    return metadata


def shortened(message: str) -> str:
    """``message`` cut to what a status's trailers can carry, saying how long it was."""
    if len(message) <= _MAX_MESSAGE_CHARS:
        return message
    return f"{message[:_MAX_MESSAGE_CHARS]}... ({len(message)} characters in all)"
