"""Change notification, written once for both storages: what changed in a stream, and who hears.

Every change applied to a segment, on either storage (an append's commit, an
idle tick, a change of the writers' marks, a seal, a truncation, and the
segment's creation), passes through its
:class:`~connector.store.published.PublishedSegment`, which notes it here
while it holds the segment's lock, right after the change is visible:

- each stream has one :class:`StreamChanges`: a version that every change of
  one of its segments raises by one, a random *incarnation* that names this
  record (a stream created again, or rebuilt by another server, or a server
  started again, has another), and its segments in the order of their last
  change, so "what changed after version v" costs what changed, never what
  the stream holds (:meth:`StreamChanges.since`);
- :class:`Listeners` are told of each change of what they listen to (a
  segment, or a whole stream): each is a quick callback, O(1), that must not
  call the store (it runs on the thread that applies changes, under the
  segment's lock); scheduling a wake-up on an event loop is what they do.

On JetStream every server applies every stream's messages to its own
segments (pushed, or pulled when it is behind), so a change made through
another server reaches this server's listeners the same way.

Lock order: a segment's lock, then its stream's (the one here); listeners
are called with the segment's lock held and nothing of this module's.
"""

from __future__ import annotations

import collections
import itertools
import logging
import secrets
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Listener", "Listeners", "StreamChanges", "new_incarnation"]

_log = logging.getLogger(__name__)

T = TypeVar("T")

#: A callback told that something it listens to changed; quick, never calls the store.
Listener = Callable[[], None]


def new_incarnation() -> int:
    """A random, non-zero identity of one record of changes (0 means "nothing known")."""
    return secrets.randbits(62) + 1


class Listeners:
    """Callbacks told of every change; added and removed from any thread, O(1) each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._listeners: dict[int, Listener] = {}

    def add(self, listener: Listener) -> Callable[[], None]:
        """Tells ``listener`` of every change from now on; returns what stops it (idempotent)."""
        with self._lock:
            key = next(self._ids)
            self._listeners[key] = listener

        def remove() -> None:
            with self._lock:
                self._listeners.pop(key, None)

        return remove

    def __len__(self) -> int:
        with self._lock:
            return len(self._listeners)

    def notify(self) -> None:
        """Calls every listener; one that fails is logged, the others are still told."""
        if not self._listeners:  # most segments have none: no lock, no copy
            return
        with self._lock:
            listeners = list(self._listeners.values())
        for listener in listeners:
            try:
                listener()
            except Exception:  # a listener's failure must not fail the change's thread
                _log.exception("a change listener failed")


class StreamChanges(Generic[T]):
    """One stream's changes on this server: a version, an incarnation, segments by last change.

    Thread-safe. ``T`` is the kind of segment noted (the storage's).
    """

    def __init__(self) -> None:
        #: Names this record of changes; versions mean something only with it.
        self.incarnation = new_incarnation()
        self._lock = threading.Lock()
        self._version = 0
        # Segment number -> (its last change's version, the segment), oldest change first.
        self._order: collections.OrderedDict[int, tuple[int, T]] = collections.OrderedDict()
        #: Told of every change of every segment of the stream, and when it goes away.
        self.listeners = Listeners()

    @property
    def version(self) -> int:
        """The version of the stream's last change (0: none yet)."""
        with self._lock:
            return self._version

    def note(self, number: int, segment: T) -> int:
        """Records a change of segment ``number`` (visible already); returns its version.

        Call with the segment's lock held, so that the version and the
        segment's state are read together; tells the stream's listeners.
        """
        with self._lock:
            self._version += 1
            self._order[number] = (self._version, segment)
            self._order.move_to_end(number)
            version = self._version
        self.listeners.notify()
        return version

    def since(self, version: int) -> tuple[int, list[T]]:
        """The stream's version now, and its segments changed after ``version``, oldest first.

        O(what changed): the segments are kept in the order of their last
        change. Version 0 gives every segment. A segment whose state is read
        after this call shows at least the change this call counted.
        """
        with self._lock:
            changed: list[T] = []
            for noted, segment in reversed(self._order.values()):
                if noted <= version:
                    break
                changed.append(segment)
            changed.reverse()
            return self._version, changed

    def __repr__(self) -> str:
        return f"StreamChanges(incarnation={self.incarnation}, version={self.version})"
