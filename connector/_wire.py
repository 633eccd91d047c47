"""Settings both ends of the gRPC connection share."""

from __future__ import annotations

#: Channel and server options: batches of events can be large.
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]

#: Trailing metadata key naming the domain error class, so clients raise the same one.
ERROR_KIND_KEY = "tidemark-error"
#: With SegmentSealedError: the sealed segment, and its successors joined by commas.
SEALED_SEGMENT_KEY = f"{ERROR_KIND_KEY}-segment"
SUCCESSORS_KEY = f"{ERROR_KIND_KEY}-successors"
