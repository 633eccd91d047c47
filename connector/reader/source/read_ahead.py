"""Reading ahead: the next store read runs while the consumer works on the one before.

A task that reads and then decodes in turn keeps either the store or
itself waiting; :func:`read_ahead` runs the reads in a thread of their own
(a gRPC call waits without holding the GIL), up to ``depth`` answers ahead.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

__all__ = ["read_ahead"]

T = TypeVar("T")

_ITEM, _END, _ERROR = range(3)


def read_ahead(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """``items``, produced by a thread of their own at most ``depth`` items ahead of the consumer.

    Guarantees: every item once, in order; an error ``items`` raises is
    raised here after the items before it, and no item after it is taken;
    closing the result (a ``for`` loop left early, a generator closed)
    stops the thread before this returns: it takes no item after the one
    it is producing (which is then dropped) and closes ``items``.

    Raises:
        ValueError: ``depth`` below 1.
    """
    if depth < 1:
        msg = f"read_ahead needs a depth of at least 1, got {depth!r}"
        raise ValueError(msg)
    slots: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                slots.put((_ITEM, item))
                if stop.is_set():
                    break
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
            slots.put((_ERROR, error))
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        slots.put((_END, None))

    thread = threading.Thread(target=produce, name="tidemark-read-ahead", daemon=True)
    thread.start()
    kind = _ITEM
    try:
        while True:
            kind, value = slots.get()
            if kind == _ERROR:
                raise value
            if kind == _END:
                return
            yield value
    finally:
        stop.set()
        while kind == _ITEM:  # make room until the thread's last word: it never blocks
            kind, _ = slots.get()
        thread.join()
