"""A function's store calls on a Python thread of its own, and reads ahead of their use.

Why a thread: in PyFlink's thread mode a Python function runs on a thread
of the TaskManager's JVM, on a thread state pemja made for it. When two
Python functions share a task (chained, as a user's ``map`` after the
source is), only one of their thread states is the one CPython knows as
that thread's own, and a C extension that takes the interpreter lock the
standard way (``PyGILState_Ensure``, which gRPC's Cython layer does inside
every call) from the other one waits for a lock its own thread holds: the
call never returns (found with gdb on a stuck job; it needs no load to
happen). A thread started by Python has a thread state of its own, so the
source's functions make every store call on one (:class:`StoreThread`).
The same holds in process mode, where the thread costs nothing more.

The thread also lets store reads overlap the rest: :class:`Pending` reads
a queue of work items there, in order, while the function's own thread
turns earlier results into rows and hands them to Flink (gRPC releases the
interpreter lock while it waits for the store).

Closing the thread closes its client at once, from a thread of its own
(not behind the calls queued on the store thread): a call in flight, say
one retrying against a store that is gone, ends then instead of when its
retries run out, and a cancelled job does not wait for it. Such a call,
and any call after, raises :class:`StoreThreadClosed`, which a function
takes as "closing: nothing more to emit".
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from connector.client import StoreClient

__all__ = ["Pending", "StoreThread", "StoreThreadClosed"]

#: How long closing waits for the client's channel to close, s.
_CLOSE_WAIT_S = 5.0

T = TypeVar("T")
R = TypeVar("R")


class StoreThreadClosed(Exception):
    """A call on a store thread that was closed before the call ended: its function is closing."""


class StoreThread:
    """One Python thread making a function's store calls, one at a time, in order.

    :meth:`call` runs a call there and waits for it; :meth:`submit` queues
    one and returns its future, whose outcome :meth:`result` takes. Once
    the thread is closed, each of them raises :class:`StoreThreadClosed`
    for a call that had not ended. Closing twice is harmless.
    """

    def __init__(self, name: str):
        self._name = name
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._closed = False

    def call(self, function: Callable[..., R], *args: Any) -> R:
        """``function(*args)`` on the store thread; its result, or its exception raised here."""
        return self.result(self.submit(function, *args))

    def submit(self, function: Callable[..., R], *args: Any) -> Future[R]:
        """Queues ``function(*args)`` behind the calls before it; returns its future."""
        try:
            return self._pool.submit(_run, function, *args)
        except RuntimeError:  # the pool is shut down
            if self._closed:
                raise StoreThreadClosed(self._name) from None
            raise

    def result(self, future: Future[R]) -> R:
        """``future``'s result (waiting for it), or its exception raised here.

        Raises:
            StoreThreadClosed: the thread was closed before the call ended (a
                call in flight fails as its client closes).
        """
        try:
            return future.result()
        except CancelledError:
            raise StoreThreadClosed(self._name) from None
        except Exception as error:
            if self._closed:
                raise StoreThreadClosed(self._name) from error
            raise

    def close(self, client: StoreClient | None = None) -> None:
        """Drops the queued calls, closes ``client`` at once and lets the thread end.

        ``client`` (the one the calls use) is closed from a new Python
        thread, not queued behind the calls, so a call in flight ends now.
        """
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        if client is not None:
            closer = threading.Thread(target=client.close, name=f"{self._name}-close", daemon=True)
            closer.start()
            closer.join(_CLOSE_WAIT_S)


def _run(function: Callable[..., R], *args: Any) -> R:
    """``function(*args)``, called from this module: the adapter is its caller, as traces see it."""
    return function(*args)


class Pending(Generic[T, R]):
    """Work items read on a store thread in arrival order; their results taken in that order.

    :meth:`add` queues an item (``read(item)`` starts on the store thread
    once the items before it are read); :meth:`ready` returns the results
    at the head that are done, without waiting; :meth:`drain` waits for all.
    An item's exception is raised when its turn comes.
    """

    def __init__(self, thread: StoreThread, read: Callable[[T], R]):
        self._thread = thread
        self._read = read
        self._queue: deque[tuple[T, Future[R]]] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, item: T) -> None:
        """Starts reading ``item`` behind the items before it."""
        self._queue.append((item, self._thread.submit(self._read, item)))

    def ready(self) -> Iterator[tuple[T, R]]:
        """The head's finished items and results, in order, without waiting."""
        while self._queue and self._queue[0][1].done():
            item, future = self._queue.popleft()
            yield item, self._thread.result(future)

    def drain(self) -> Iterator[tuple[T, R]]:
        """Every queued item and its result, in order, waiting for each."""
        while self._queue:
            item, future = self._queue.popleft()
            yield item, self._thread.result(future)

    def cancel(self) -> None:
        """Forgets the queued items (those not started are not read)."""
        while self._queue:
            self._queue.popleft()[1].cancel()
