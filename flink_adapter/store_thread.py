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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

__all__ = ["Pending", "StoreThread"]

T = TypeVar("T")
R = TypeVar("R")


class StoreThread:
    """One Python thread making a function's store calls, one at a time, in order.

    :meth:`call` runs a call there and waits for it; :meth:`submit` queues
    one and returns its future. Closing twice is harmless.
    """

    def __init__(self, name: str):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def call(self, function: Callable[..., R], *args: Any) -> R:
        """``function(*args)`` on the store thread; its result, or its exception raised here."""
        return self._pool.submit(_run, function, *args).result()

    def submit(self, function: Callable[..., R], *args: Any) -> Future[R]:
        """Queues ``function(*args)`` behind the calls before it; returns its future."""
        return self._pool.submit(_run, function, *args)

    def close(self) -> None:
        """Stops the thread once the queued calls are done."""
        self._pool.shutdown(wait=True, cancel_futures=True)


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
            yield item, future.result()

    def drain(self) -> Iterator[tuple[T, R]]:
        """Every queued item and its result, in order, waiting for each."""
        while self._queue:
            item, future = self._queue.popleft()
            yield item, future.result()

    def cancel(self) -> None:
        """Forgets the queued items (those not started are not read)."""
        while self._queue:
            self._queue.popleft()[1].cancel()
