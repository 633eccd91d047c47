"""Fetch sessions: one call reads many segments, and a session costs what changes (KIP-227).

A :class:`FetchSession` remembers, per segment, where its reader is (the
offset of its next read and the watermarks it knows) and whether the segment
is *armed*. It follows each segment through the store
(:meth:`Storage.follow <connector.store.Storage.follow>`): every change of a
segment marks it *dirty* in O(1), from the thread that applied the change,
and wakes the session's parked call once. A call looks only at the dirty
armed segments, so an idle session over thousands of segments costs nothing
between changes, and a call over them costs what changed.

Flow control: a segment answered with data is disarmed until the reader
re-arms it (it consumed the data); a watermark-only answer leaves it armed
and the session remembers the watermark told, so the next rise is answered
again. A segment at its end leaves the session once told so; one that fails
(truncated past the cursor, deleted) leaves it with its error.

Epochs: each answer carries the session's epoch; the next request must carry
it. A request with another epoch (an answer lost, a request sent twice) or
for a session this server does not hold for its caller fails with
:class:`~connector.errors.FetchSessionError` and closes the session: the
reader opens a new one with every cursor, from what it received. A call that
fails after its request was taken closes the session too.

A store that cannot be reached fails the whole call (UNAVAILABLE, which a
client retries; the session is closed and opened again), never a segment.

Limits (:class:`FetchLimits`): sessions per server and per connection,
segments per session and cursors over every session; a request beyond one is
refused with RESOURCE_EXHAUSTED naming it and its option, before anything
changes. A session nobody called for ``idle_timeout_s`` is dropped when room
is needed.

Threads: :class:`FetchSessions` and the epoch steps run on the server's event
loop; a session's reads (:meth:`FetchSession.apply`, :meth:`FetchSession.collect`)
run on a read pool thread, one call of a session at a time, and only when
there is something to apply or a segment changed (:attr:`FetchSession.changed`,
asked on the loop); listeners run on the store's threads and touch only the
dirty set, under its own lock.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from connector.errors import (
    FailedPreconditionError,
    FetchSessionError,
    InvalidArgumentError,
    ResourceExhaustedError,
    StoreUnavailableError,
    TidemarkError,
)
from connector.model import FetchPosition, ReadResult
from connector.store import Storage
from connector.store.reading import FollowedSegment

__all__ = [
    "CursorRequest",
    "FetchAnswer",
    "FetchLimits",
    "FetchSession",
    "FetchSessions",
    "Owner",
]

#: Who a session belongs to: the connection (gRPC's peer) and the caller's token name.
Owner = tuple[str, str | None]


@dataclass(frozen=True)
class FetchLimits:
    """How many fetch sessions and cursors a server holds; see the module docstring.

    Attributes:
        sessions: open sessions on the server.
        sessions_per_connection: open sessions of one connection.
        session_segments: segments one session follows.
        cursors: segments followed over every session (memory: about a
            kilobyte each).
        idle_timeout_s: a session nobody called for this long may be dropped.
    """

    sessions: int = 1_024
    sessions_per_connection: int = 64
    session_segments: int = 16_384
    cursors: int = 262_144
    idle_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("sessions", "sessions_per_connection", "session_segments", "cursors"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                msg = f"max_fetch_{name} must be an integer >= 1, got {value!r}"
                raise InvalidArgumentError(msg)
        if not self.idle_timeout_s > 0:
            msg = f"fetch session idle_timeout_s must be > 0, got {self.idle_timeout_s!r}"
            raise InvalidArgumentError(msg)


@dataclass(frozen=True)
class CursorRequest:
    """A segment to add or move to ``position``, or (``position`` None) to re-arm, in a session."""

    segment: str
    position: FetchPosition | None = None


@dataclass
class FetchAnswer:
    """What one call answers: the segments with something new, and those that failed."""

    reads: list[ReadResult] = field(default_factory=list)
    failures: list[tuple[str, TidemarkError]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.reads or self.failures)


class _Cursor:
    """One segment of a session: the segment followed, where its reader is, whether armed."""

    __slots__ = ("armed", "followed", "position")

    def __init__(self, followed: FollowedSegment, position: FetchPosition):
        self.followed = followed
        self.position = position
        self.armed = True


class FetchSession:
    """One reader's cursors over many segments; see the module docstring."""

    def __init__(self, session_id: int, owner: Owner, now: float):
        self.id = session_id
        self.owner = owner
        #: The epoch of the last answer (0: none yet); the next request carries it.
        self.epoch = 0
        #: Whether a call of the session is under way.
        self.busy = False
        self.closed = False
        self.last_used = now
        self._cursors: dict[str, _Cursor] = {}
        self._armed = 0
        # Segments changed since the last look, in order (a dict as an ordered set).
        self._dirty_lock = threading.Lock()
        self._dirty: dict[str, None] = {}
        self._wake: Callable[[], None] | None = None

    # --- counts (any thread) -------------------------------------------------

    @property
    def segments(self) -> int:
        """How many segments the session follows."""
        return len(self._cursors)

    @property
    def armed(self) -> int:
        """How many of them are armed."""
        return self._armed

    @property
    def changed(self) -> bool:
        """Whether a segment changed since the last look (:meth:`collect` reads only those)."""
        with self._dirty_lock:
            return bool(self._dirty)

    def segments_after(self, added: Collection[str], released: Collection[str]) -> int:
        """How many segments the session would follow after a request adding and releasing."""
        kept = len(self._cursors) - sum(1 for name in released if name in self._cursors)
        return kept + sum(1 for name in added if name not in self._cursors)

    # --- changes (the store's threads) --------------------------------------------

    def _changed(self, name: str) -> None:
        """A listener: ``name`` changed. O(1); wakes a parked call on the first change."""
        with self._dirty_lock:
            first = not self._dirty
            self._dirty[name] = None
            wake = self._wake if first else None
            if wake is not None:
                self._wake = None
        if wake is not None:
            wake()

    def park(self, wake: Callable[[], None]) -> bool:
        """Arranges for ``wake()`` at the next change; False when one is waiting already."""
        with self._dirty_lock:
            if self._dirty or self.closed:
                return False
            self._wake = wake
            return True

    def unpark(self) -> None:
        """Withdraws the wake-up :meth:`park` arranged."""
        with self._dirty_lock:
            self._wake = None

    def _take_dirty(self) -> list[str]:
        with self._dirty_lock:
            names = list(self._dirty)
            self._dirty.clear()
            return names

    def _put_back_first(self, names: Sequence[str]) -> None:
        with self._dirty_lock:
            self._dirty = {**dict.fromkeys(names), **self._dirty}

    # --- a call's work (a read pool thread) ----------------------------------------

    def apply(
        self, store: Storage, cursors: Sequence[CursorRequest], released: Collection[str]
    ) -> list[tuple[str, TidemarkError]]:
        """Releases, adds, moves and re-arms segments; returns those that failed (and left)."""
        failures: list[tuple[str, TidemarkError]] = []
        for name in released:
            self._drop(name)
        for request in cursors:
            try:
                self._place(store, request)
            except StoreUnavailableError:
                raise  # the whole call fails, and is retried: no segment leaves for it
            except TidemarkError as error:
                failures.append((request.segment, error))
                self._drop(request.segment)
        return failures

    def _place(self, store: Storage, request: CursorRequest) -> None:
        name, position = request.segment, request.position
        cursor = self._cursors.get(name)
        if position is None:
            if cursor is None:
                msg = (
                    f"segment {name!r} is not in fetch session {self.id}: "
                    "give the offset to read it from"
                )
                raise FailedPreconditionError(msg)
        elif cursor is None:
            followed = store.follow(
                name, position.offset, position.known_watermark, lambda: self._changed(name)
            )
            cursor = self._cursors[name] = _Cursor(followed, position)
            self._armed += 1
        else:
            cursor.position = position
        if not cursor.armed:
            cursor.armed = True
            self._armed += 1
        self._changed(name)  # looked at by the next collect

    def _drop(self, name: str) -> None:
        cursor = self._cursors.pop(name, None)
        if cursor is not None:
            cursor.followed.close()
            self._armed -= int(cursor.armed)

    def drop(self, name: str) -> None:
        """Takes ``name`` out of the session (during a call of it)."""
        self._drop(name)

    def collect(self, max_bytes: int, max_bytes_per_segment: int, max_reads: int) -> FetchAnswer:
        """Reads every dirty armed segment that has something new, within the budgets.

        At most ``max_reads`` segments and about ``max_bytes`` of data (the
        first segment with data gets at least one whole event); dirty
        segments left over come first next time.
        """
        answer = FetchAnswer()
        budget = max_bytes
        names = self._take_dirty()
        for position_in_order, name in enumerate(names):
            if budget <= 0 or len(answer.reads) >= max_reads:
                self._put_back_first(names[position_in_order:])
                break
            cursor = self._cursors.get(name)
            if cursor is None or not cursor.armed:
                continue
            position = cursor.position
            try:
                read = cursor.followed.read(
                    position.offset, min(max_bytes_per_segment, budget), position.known_watermark
                )
            except StoreUnavailableError:
                self._put_back_first(names[position_in_order:])
                raise
            except TidemarkError as error:
                answer.failures.append((name, error))
                self._drop(name)
                continue
            if not position.is_news(read):
                continue
            answer.reads.append(read)
            budget -= len(read.data)
            if read.end_of_segment:
                self._drop(name)
                continue
            cursor.position = position.after(read)
            if read.data:  # disarmed until its reader consumed the data
                cursor.armed = False
                self._armed -= 1
        return answer

    def close(self) -> None:
        """Marks the session closed and wakes its parked call; closing twice is harmless.

        Its segments are let go by :meth:`release`, once no call of it runs.
        """
        with self._dirty_lock:
            self.closed = True
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    def release(self) -> None:
        """Stops following every segment (the session closed, and no call of it runs)."""
        for name in list(self._cursors):
            self._drop(name)

    def __repr__(self) -> str:
        return f"FetchSession(id={self.id}, epoch={self.epoch}, segments={self.segments})"


class FetchSessions:
    """The fetch sessions of one server, by id; see the module docstring.

    Takes and opens sessions on the event loop; counts from any thread.
    """

    def __init__(
        self, limits: FetchLimits | None = None, monotonic: Callable[[], float] = time.monotonic
    ):
        self.limits = limits or FetchLimits()
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._sessions: dict[int, FetchSession] = {}

    def begin(
        self,
        owner: Owner,
        session_id: int,
        epoch: int,
        added: Collection[str],
        released: Collection[str],
    ) -> FetchSession:
        """The session a request goes to, taken for its call: opened (``session_id`` 0) or found.

        Checks every limit before anything changes; then the session is busy
        and its epoch is the answer's.

        Raises:
            FetchSessionError: no such session for ``owner``, or another epoch
                (the session is closed then).
            ResourceExhaustedError: a limit would be passed (nothing changed).
        """
        now = self._monotonic()
        with self._lock:
            if session_id == 0:
                session = self._open(owner, now)
            else:
                session = self._take(owner, session_id, epoch)
            try:
                self._check_room(session, added, released)
            except ResourceExhaustedError:
                if session.epoch == 0:
                    del self._sessions[session.id]
                raise
            session.busy = True
            session.epoch += 1
            session.last_used = now
            return session

    def _take(self, owner: Owner, session_id: int, epoch: int) -> FetchSession:
        session = self._sessions.get(session_id)
        if session is None or session.owner != owner:
            msg = (
                f"fetch session {session_id} is not open on this connection (closed, expired, "
                "or opened elsewhere): open a new one"
            )
            raise FetchSessionError(msg)
        if session.busy or epoch != session.epoch:
            self._close(session)
            msg = (
                f"fetch session {session_id} expected epoch {session.epoch}, got {epoch} "
                "(an answer was lost, or a request sent twice): it is closed; open a new one"
            )
            raise FetchSessionError(msg)
        return session

    def _open(self, owner: Owner, now: float) -> FetchSession:
        self._drop_idle(now)
        limits = self.limits
        if len(self._sessions) >= limits.sessions:
            msg = (
                f"the server holds {len(self._sessions)} fetch sessions, its limit "
                f"(max_fetch_sessions; tidemark-server --max-fetch-sessions {limits.sessions}): "
                "close one, or wait for idle ones to expire"
            )
            raise ResourceExhaustedError(msg, cause="fetch_sessions_limit")
        mine = sum(1 for s in self._sessions.values() if s.owner[0] == owner[0])
        if mine >= limits.sessions_per_connection:
            most = limits.sessions_per_connection
            msg = (
                f"this connection holds {mine} fetch sessions, the most one may "
                f"(tidemark-server --max-fetch-sessions-per-connection {most}): close one first"
            )
            raise ResourceExhaustedError(msg, cause="fetch_sessions_limit")
        session_id = secrets.randbits(62) + 1
        while session_id in self._sessions:
            session_id = secrets.randbits(62) + 1
        session = self._sessions[session_id] = FetchSession(session_id, owner, now)
        return session

    def _check_room(
        self, session: FetchSession, added: Collection[str], released: Collection[str]
    ) -> None:
        limits = self.limits
        after = session.segments_after(added, released)
        if after > limits.session_segments:
            most = limits.session_segments
            msg = (
                f"fetch session {session.id} would follow {after} segments, over its limit "
                f"(tidemark-server --max-fetch-session-segments {most}): use another session "
                "for the rest"
            )
            raise ResourceExhaustedError(msg, cause="fetch_session_segments_limit")
        total = sum(s.segments for s in self._sessions.values()) - session.segments + after
        if after > session.segments and total > limits.cursors:
            msg = (
                f"the server's fetch sessions would follow {total} segments, over its limit "
                f"(tidemark-server --max-fetch-cursors {limits.cursors})"
            )
            raise ResourceExhaustedError(msg, cause="fetch_cursors_limit")

    def _drop_idle(self, now: float) -> None:
        idle = [
            s
            for s in self._sessions.values()
            if not s.busy and now - s.last_used > self.limits.idle_timeout_s
        ]
        for session in idle:
            self._close(session)

    def finish(self, session: FetchSession) -> None:
        """The session's call ended: it waits for its next request, or is let go if closed."""
        with self._lock:
            session.busy = False
            session.last_used = self._monotonic()
            if session.closed:
                session.release()

    def close_id(self, owner: Owner, session_id: int) -> None:
        """Closes ``owner``'s session ``session_id``; nothing when there is none (idempotent)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.owner == owner:
                self._close(session)

    def close(self, session: FetchSession) -> None:
        """Closes ``session`` (its call failed, or its reader closed it)."""
        with self._lock:
            self._close(session)

    def _close(self, session: FetchSession) -> None:
        self._sessions.pop(session.id, None)
        session.close()
        if not session.busy:
            session.release()

    def close_all(self) -> None:
        """Closes every session (the server stopping)."""
        with self._lock:
            for session in list(self._sessions.values()):
                self._close(session)

    def counts(self) -> tuple[int, int, int]:
        """Open sessions, the segments they follow, and how many of those are armed."""
        with self._lock:
            sessions = list(self._sessions.values())
        return len(sessions), sum(s.segments for s in sessions), sum(s.armed for s in sessions)

    def __repr__(self) -> str:
        return f"FetchSessions({len(self._sessions)} open)"
