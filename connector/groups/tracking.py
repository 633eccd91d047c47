"""A group's time kept up to date as its state and a reader's positions change.

:meth:`GroupTime.least <connector.groups.state.GroupTime.least>` looks at
every unfinished segment; a reader that asks after every event would pay
that for each. :class:`GroupTimeTracker` gives the same answer at the cost
of what changed: a heap of the segments' times with lazy deletion (an entry
whose segment's time changed since is dropped when it reaches the top).
"""

from __future__ import annotations

import heapq

from connector.groups.state import GroupState, GroupTime, SegmentCursor, least_unfinished

__all__ = ["GroupTimeTracker"]

#: A heap holding more than this many times the entries that count is rebuilt.
_SLACK = 2

#: Stands for a segment no longer counted, in :meth:`GroupTimeTracker.least`.
_GONE = object()


class GroupTimeTracker:
    """The group's time (one :class:`GroupTime`) over a state and a reader's fresher values.

    Guarantees: :meth:`least` always equals ``time.least(state, fresher)``
    for the state last given to :meth:`follow` and the fresher values set
    and not dropped since. Costs: :meth:`follow` compares each segment's
    entry with the previous state's (nothing when it is the same object)
    and spends O(log N) on each that differs; :meth:`set_fresher` and
    :meth:`drop_fresher` O(log N); :meth:`least` O(1) amortized.
    Not thread-safe.
    """

    def __init__(self, time: GroupTime, state: GroupState | None = None):
        self._time = time
        self._state = GroupState()
        self._fresher: dict[str, int | None] = {}
        self._times: dict[str, int | None] = {}  # every unfinished segment's time
        self._unknown: set[str] = set()  # segments whose time is not known (None)
        self._heap: list[tuple[int, str]] = []  # (time, segment), some no longer true
        if state is not None:
            self.follow(state)

    @property
    def state(self) -> GroupState:
        """The state last followed."""
        return self._state

    def follow(self, state: GroupState) -> None:
        """Takes ``state`` as the group's state; the fresher values set stay."""
        before, self._state = self._state, state
        if state is before:
            return
        for segment in before.cursors.keys() - state.cursors.keys():
            self._forget(segment)
        for segment in before.waiting.keys() - state.waiting.keys():
            self._forget(segment)
        for segment, cursor in state.cursors.items():
            previous = before.cursors.get(segment)
            if previous is not cursor and previous != cursor:
                self._put(segment, self._of_cursor(segment, cursor))
        for segment, entry in state.waiting.items():
            waited = before.waiting.get(segment)
            if waited is not entry and waited != entry:
                self._put(segment, self._time.of_waiting(entry))

    def set_fresher(self, segment: str, value: int | None) -> None:
        """A reader's newer value of ``segment`` (it counts while the segment is readable)."""
        self._fresher[segment] = value
        cursor = self._state.cursors.get(segment)
        if cursor is not None:
            self._put(segment, self._time.with_fresher(cursor, value))

    def drop_fresher(self, segment: str) -> None:
        """Forgets the reader's value of ``segment``: the state's counts again."""
        if segment not in self._fresher:
            return
        del self._fresher[segment]
        cursor = self._state.cursors.get(segment)
        if cursor is not None:
            self._put(segment, self._time.of_cursor(cursor))

    def least(self) -> int | None:
        """The group's time: :func:`~connector.groups.state.least_unfinished` of every segment's."""
        heap, times = self._heap, self._times
        while heap and times.get(heap[0][1], _GONE) != heap[0][0]:
            heapq.heappop(heap)
        known = (heap[0][0],) if heap else ()
        unknown = (None,) if self._unknown else ()
        return least_unfinished(known, unknown)

    def __repr__(self) -> str:
        return f"GroupTimeTracker({self._time!r}, segments={len(self._times)})"

    # --- the entries ---------------------------------------------------------------

    def _of_cursor(self, segment: str, cursor: SegmentCursor) -> int | None:
        if segment in self._fresher:
            return self._time.with_fresher(cursor, self._fresher[segment])
        return self._time.of_cursor(cursor)

    def _put(self, segment: str, time: int | None) -> None:
        if segment in self._times and self._times[segment] == time:
            return
        self._times[segment] = time
        if time is None:
            self._unknown.add(segment)
            return
        self._unknown.discard(segment)
        heapq.heappush(self._heap, (time, segment))
        if len(self._heap) > _SLACK * len(self._times) + 16:
            self._heap = [(t, s) for s, t in self._times.items() if t is not None]
            heapq.heapify(self._heap)

    def _forget(self, segment: str) -> None:
        self._times.pop(segment, None)
        self._unknown.discard(segment)
