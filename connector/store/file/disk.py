"""Writing to disk in full or not at all, and what a failed write means to a caller.

``os.write`` may write part of what it was given (a nearly full file system
does exactly that); the store must never count bytes that are not on disk.
:func:`write_all` writes everything or cuts the file back to where it was and
raises, and :func:`domain_error` turns the ``OSError`` into the error a client
gets: ``RESOURCE_EXHAUSTED`` for space and descriptors, ``UNAVAILABLE`` for
other I/O failures, never with the server's file paths in the message.
"""

from __future__ import annotations

import errno
import os

from connector.errors import ResourceExhaustedError, StoreUnavailableError, TidemarkError

__all__ = ["domain_error", "write_all"]

_OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})


def write_all(fd: int, data: bytes, size_before: int) -> None:
    """Appends all of ``data`` to ``fd`` (opened with O_APPEND), or none of it.

    ``size_before`` is the file's size before the write: on any failure the
    file is cut back to it, then the error is raised. A write that makes no
    progress is reported as ENOSPC.

    Raises:
        OSError: the write failed; the file holds ``size_before`` bytes again
            (unless cutting it back failed too, which raises that error instead).
    """
    view = memoryview(data)
    written = 0
    try:
        while written < len(view):
            count = os.write(fd, view[written:])
            if count <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written += count
    except OSError:
        if written:
            os.ftruncate(fd, size_before)
        raise


def domain_error(error: OSError, what: str, outcome: str = "stored") -> TidemarkError:
    """The error a caller gets when ``what`` (``"the append"``...) failed with ``error``.

    The message says ``what`` was not ``outcome`` (``"stored"``, ``"served"``).
    """
    if error.errno in _OUT_OF_SPACE:
        msg = (
            f"the store is out of disk space: {what} was not {outcome} (retry once space is freed)"
        )
        return ResourceExhaustedError(msg, cause="out_of_disk_space")
    if error.errno in _OUT_OF_DESCRIPTORS:
        msg = f"the store has too many open files: {what} was not {outcome}"
        return ResourceExhaustedError(msg, cause="too_many_open_files")
    reason = os.strerror(error.errno) if error.errno else type(error).__name__
    msg = f"the store could not write to disk ({reason}): {what} was not {outcome}"
    return StoreUnavailableError(msg)
