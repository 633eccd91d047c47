"""The exceptions Tidemark raises: one base class, one subclass per domain outcome.

The server maps each to a gRPC status code and the client maps the code back,
so callers catch the same classes whether the store is local or remote.
"""

from __future__ import annotations

__all__ = [
    "AlreadyExistsError",
    "quoted",
    "ClosedError",
    "DataDirDamagedError",
    "DataDirLockedError",
    "DataLossError",
    "DuplicateEventNumbersError",
    "FailedPreconditionError",
    "FetchSessionError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutcomeUnknownError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "SegmentSealedError",
    "StoreUnavailableError",
    "TidemarkError",
    "TruncatedError",
    "UnauthenticatedError",
]


def quoted(value: object, limit: int = 200) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters.

    A long value (a 100 KB name, say) is shown by its start and its length,
    so messages stay readable and fit in gRPC's metadata.
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    length = f" ({len(value)} characters)" if isinstance(value, str | bytes) else ""
    return f"{text[:limit]}...{length}"


class TidemarkError(Exception):
    """Base class of every error Tidemark raises on purpose."""


class InvalidArgumentError(TidemarkError, ValueError):
    """A request is malformed: a bad name, offset, count or option value."""


class NotFoundError(TidemarkError, LookupError):
    """A scope, stream, segment or state key does not exist."""


class AlreadyExistsError(TidemarkError):
    """A scope or stream with that name exists already."""


class FailedPreconditionError(TidemarkError):
    """The request is well formed but the store's state does not allow it."""


class ClosedError(FailedPreconditionError):
    """A reader, writer or client was used after it was closed."""


class FetchSessionError(FailedPreconditionError):
    """A fetch session's request did not follow its last answer: open a new session.

    The session is unknown (never opened, expired, or opened on another
    connection or server), or the request's epoch is not its last answer's
    (an answer was lost, or a request sent twice). The server closes the
    session; the caller opens a new one with every cursor it holds.
    """


class DataDirLockedError(FailedPreconditionError):
    """Another store holds the data dir: two stores on one dir would overwrite each other.

    Attributes:
        data_dir: the data dir.
        holder_pid: the process id the holder wrote in the lock file (None: unknown).
    """

    def __init__(self, message: str, data_dir: str = "", holder_pid: int | None = None):
        super().__init__(message)
        self.data_dir = data_dir
        self.holder_pid = holder_pid


class SegmentSealedError(FailedPreconditionError):
    """An append or scale named a segment that is sealed.

    Attributes:
        segment: the sealed segment's name.
        successors: the segments that took over its key range (may be empty).
    """

    def __init__(self, message: str, segment: str = "", successors: tuple[str, ...] = ()):
        super().__init__(message)
        self.segment = segment
        self.successors = successors


class TruncatedError(TidemarkError):
    """A read asked for data its stream was truncated past.

    Attributes:
        segment: the segment read.
        first_offset: the first offset still readable in it (its end, if the
            whole segment was truncated: reading there gives its successors).
    """

    def __init__(self, message: str, segment: str = "", first_offset: int = 0):
        super().__init__(message)
        self.segment = segment
        self.first_offset = first_offset


class ResourceExhaustedError(TidemarkError):
    """A request exceeds a limit, such as the maximum event size.

    Attributes:
        cause: which limit, in a word for metrics: ``out_of_disk_space``,
            ``too_many_open_files``, ``event_too_large``, ``batch_too_large``,
            ``segment_limit``, ``stream_segment_limit``, ``parked_reads_limit``,
            ``fetch_sessions_limit``, ``fetch_session_segments_limit``,
            ``fetch_cursors_limit``, ``batch_limit``, or ``limit`` when unknown.
    """

    def __init__(self, message: str, cause: str = "limit"):
        super().__init__(message)
        self.cause = cause


class DataLossError(TidemarkError):
    """Stored data failed its checksum: acknowledged events cannot be read back as written.

    Never retried: the same bytes fail again. A read gets it at the first
    damaged event, after every intact one before it was served.

    Attributes:
        segment: the segment whose data is damaged ("" when not a segment's).
        offset: the byte offset of the first damaged event (-1: unknown).
        next_offset: where the append holding the damage ends (-1: unknown):
            reading on from there skips the damage, and the events of that
            append after it.
    """

    def __init__(self, message: str, segment: str = "", offset: int = -1, next_offset: int = -1):
        super().__init__(message)
        self.segment = segment
        self.offset = offset
        self.next_offset = next_offset


class DataDirDamagedError(DataLossError):
    """A data dir holds damage a crash cannot explain: the store refuses to open it.

    A torn tail (the part of a write a crash cut short, never acknowledged)
    is cut at start; anything else that fails its checksum is refused, and
    nothing is cut or deleted. ``tidemarkctl data-dir check DIR`` says what
    is damaged and what a repair would keep.

    Attributes:
        path: the damaged file.
        offset: the byte offset of the damage in it.
    """

    def __init__(self, message: str, path: str = "", offset: int = -1):
        super().__init__(message, offset=offset)
        self.path = path


class StoreUnavailableError(TidemarkError, ConnectionError):
    """The store server cannot be reached or is shutting down."""


class OutcomeUnknownError(StoreUnavailableError):
    """A change whose answer was lost, and whose outcome the store can no longer tell.

    The value it would have changed has changed again since: it may or may
    not have been made (UNAVAILABLE, as any unknown outcome). A caller that
    computes its change from what is stored may read again and try again.
    """


class UnauthenticatedError(TidemarkError):
    """The store requires a valid bearer token and the call carried none, or a wrong one."""


class PermissionDeniedError(TidemarkError):
    """The call's token is valid but holds no right to do this on this scope."""


class DuplicateEventNumbersError(TidemarkError):
    """The store skipped events as duplicates that this writer never had stored.

    Their numbers were stored already under the writer's id by someone else:
    another writer with the same id, or numbers given out twice. These events
    are *not* stored; the writer does not retry them.

    Attributes:
        segment: where they were sent.
        writer_id: the writer id whose numbers they had.
        first_event_number: the number of ``events[0]``.
        events: the serialized events that were not stored, in order.
        routing_keys: their routing keys (``""`` for none).
    """

    def __init__(
        self,
        message: str,
        segment: str = "",
        writer_id: str = "",
        first_event_number: int = 0,
        events: tuple[bytes, ...] = (),
        routing_keys: tuple[str, ...] = (),
    ):
        super().__init__(message)
        self.segment = segment
        self.writer_id = writer_id
        self.first_event_number = first_event_number
        self.events = events
        self.routing_keys = routing_keys
