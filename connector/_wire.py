"""Settings both ends of the gRPC connection share."""

from __future__ import annotations

#: The largest message either end sends or accepts.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: The most data a read answers with over gRPC, whatever its ``max_bytes``: half the message
#: limit. A read returns at least one whole event, so the server also refuses to serve a
#: store whose ``max_event_size`` is larger than this.
MAX_READ_BYTES = MAX_MESSAGE_BYTES // 2

#: The most events one append may carry: a bigger batch would hold the store's sequencer,
#: and so every other writer, for seconds.
MAX_EVENTS_PER_APPEND = 100_000

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
