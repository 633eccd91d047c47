"""Taking a data dir: made if need be, and locked for one store at a time.

Two stores appending to the same files acknowledge appends at the same
offsets, and a restart then cuts acknowledged events off. So the store that
opens a data dir holds an exclusive ``flock`` on ``DIR/.lock`` (as Kafka's
log dirs do) for as long as it is open, with its process id written in the
file; a second store, in this process or another, is refused with
:class:`DataDirLockedError` naming the dir and that pid. :meth:`DataDirLock.release`
(the store's ``close()``) gives the lock back, and the kernel does when the
process ends in any way, ``kill -9`` included: the file left behind never
blocks a restart.
"""

from __future__ import annotations

import fcntl
import os

from connector.errors import DataDirLockedError, InvalidArgumentError, quoted

__all__ = ["LOCK_FILE", "DataDirLock", "unusable"]

#: The lock file's name in the data dir.
LOCK_FILE = ".lock"


def unusable(data_dir: str, error: OSError) -> InvalidArgumentError:
    """The error for a data dir that cannot be used (a file, read-only, not writable...)."""
    reason = os.strerror(error.errno) if error.errno else str(error)
    return InvalidArgumentError(f"data dir {quoted(data_dir)} cannot be used: {reason}")


class DataDirLock:
    """The exclusive lock of one data dir, taken when made; see the module's docstring.

    Raises:
        DataDirLockedError: another store holds the dir.
        InvalidArgumentError: the dir cannot be made or its lock file opened.
    """

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, LOCK_FILE)
        try:
            if not os.path.lexists(data_dir):  # (a file there: the open says "Not a directory")
                os.makedirs(data_dir, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise unusable(data_dir, error) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder is not None else "a process whose pid it did not write"
            msg = (
                f"data dir {quoted(data_dir)} is in use by another store ({who}): "
                "stop it first, or give this one another --data-dir"
            )
            raise DataDirLockedError(msg, data_dir, holder) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as error:
            os.close(fd)
            raise unusable(data_dir, error) from None
        self._fd: int | None = fd

    def release(self) -> None:
        """Gives the lock back; releasing twice is harmless. The file stays (a later holder's)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor of the open file drops its flock

    def __repr__(self) -> str:
        return f"DataDirLock({self.data_dir!r}, held={self._fd is not None})"


def _holder_pid(fd: int) -> int | None:
    """The pid the holder wrote in the lock file, if it wrote one yet."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
