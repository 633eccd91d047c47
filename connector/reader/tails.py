"""The tails of a set of streams' segments, learned in one call, and plans answered from them.

A planner that plans again and again (Spark's driver at every trigger, the
Flink coordinator at every epoch) needs every segment's end, watermarks and
seal each time. A :class:`TailCache` keeps them for its streams and brings
them up to date with one incremental ``DescribeTails`` call
(:meth:`StoreClient.describe_tails`): the store answers only the segments
changed since the version the cache gives back, so when nothing changed
the call answers nothing, whatever the number of segments.

:class:`TailPlans` answers ``plan_read`` for one planning pass: a read from
a segment's tail (nothing to read) from the tails, without a call; the reads
from cursors behind their tails from one ``PlanReads`` call fetched
beforehand (:meth:`TailPlans.fetch`); anything else as ``plan_read`` itself.
Its answers are the store's: a plan at the tail is what the store answers
there, and a plan fetched under a larger budget that reached the tail is
the plan under any budget it fits.

:meth:`TailCache.lag` counts a group state's lag (:mod:`connector.groups.lag`)
so: one call for the segments with events to count, none for the others.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from connector._wire import MAX_ITEMS_PER_CALL
from connector.client.connection import StoreClient
from connector.errors import StoreUnavailableError, TidemarkError
from connector.groups.lag import GroupLag, lag_plans, state_lag
from connector.groups.state import GroupState, SegmentCursor
from connector.model import PlannedRead, PlanRequest, SegmentTail, StreamTails
from connector.names import SegmentId

__all__ = ["TailCache", "TailPlans"]

#: How many times a description is asked again for the successors of a segment sealed in it.
_SCALE_ROUNDS = 16
#: How many descriptions' changed segments a cache keeps (:meth:`TailCache.changed_since`).
_CHANGES_KEPT = 8


class TailCache:
    """The tails of the segments of ``streams`` (``scope/stream``), as last described.

    Not thread-safe: one planning thread uses it. Every segment each
    stream ever had is listed, sealed ones too, each stream's in the order
    of their numbers.
    """

    def __init__(self, client: StoreClient, streams: Iterable[str]):
        self._client = client
        self._streams = tuple(dict.fromkeys(str(s) for s in streams))
        self._known: dict[str, StreamTails] = {}  # each stream's last answer, without segments
        self._by_stream: dict[str, dict[str, SegmentTail]] = {s: {} for s in self._streams}
        self._view: Mapping[str, SegmentTail] | None = None
        self._missing: set[str] = set()  # successors of sealed segments not described yet
        self._generation = 0
        #: The segments each recent description changed, by the generation it made
        #: (None: every segment, a complete answer).
        self._changes: dict[int, frozenset[str] | None] = {}
        self._lag: tuple[int, GroupState, GroupLag] | None = None  # the last lag counted
        self._waited_ms = 0

    def __repr__(self) -> str:
        versions = {s: (k.incarnation, k.version) for s, k in self._known.items()}
        return f"TailCache({self._streams!r}, known={versions!r})"

    def refresh(self, wait_ms: int = 0) -> Mapping[str, SegmentTail]:
        """The tails now: one ``DescribeTails`` call, answering only what changed since the last.

        With ``wait_ms``, a call that finds nothing changed waits on the
        server (no thread, no polling) until a tail changes, at most
        ``wait_ms``: a caller that found nothing last time asks less often
        and still learns of a change at once.

        A segment sealed by a scale is listed with its successors: a
        description that caught the seal before their creation is asked
        again (incrementally) until it holds them.

        Raises:
            NotFoundError: a stream does not exist (any more).
            StoreUnavailableError: the successors of a sealed segment never
                showed in the descriptions.
        """
        for round_ in range(_SCALE_ROUNDS):
            began = time.monotonic()
            # nothing changed: nothing more is missing (no look over all)
            changed = self._describe(wait_ms if round_ == 0 else 0)
            if round_ == 0:
                self._waited_ms = round((time.monotonic() - began) * 1000) if wait_ms else 0
            if changed:
                self._missing = self._unknown_successors()
            if not self._missing:
                return self.described()
        msg = f"the successors {sorted(self._missing)!r} of sealed segments were never described"
        raise StoreUnavailableError(msg)

    def described(self) -> Mapping[str, SegmentTail]:
        """The tails as last described, by segment name (described once first if never)."""
        if self._view is None:
            return self.refresh()
        return self._view

    @property
    def waited_ms(self) -> int:
        """How long the last :meth:`refresh` waited: its call's whole time, 0 if it could not wait.

        For a host that tells the time it spent waiting for a change apart
        from the time it spent planning (its call includes the store's answer).
        """
        return self._waited_ms

    @property
    def generation(self) -> int:
        """A number that grows whenever a description changed a tail: the same, nothing did.

        A planner keeps what it derived from the tails under this number and
        derives it again only when the number moved.
        """
        return self._generation

    def changed_since(self, generation: int) -> frozenset[str] | None:
        """The segments whose tails changed after ``generation``; None when not known.

        Known for the last few generations, unless a description since was
        complete (a new incarnation of a stream: every segment counts as changed).
        """
        changed: set[str] = set()
        for made in range(generation + 1, self._generation + 1):
            names = self._changes.get(made)
            if names is None:
                return None
            changed |= names
        return frozenset(changed)

    @property
    def server_time(self) -> int:
        """The store's clock at the last description (epoch ms; 0 before any, or if not said)."""
        return max((k.server_time for k in self._known.values()), default=0)

    def plans(self, requests: Iterable[PlanRequest] = ()) -> TailPlans:
        """A :class:`TailPlans` on the tails as last described, ``requests`` fetched in one call."""
        plans = TailPlans(self._client, self.described())
        plans.fetch(requests)
        return plans

    def lag(self, state: GroupState, assignments: Mapping[str, str] | None = None) -> GroupLag:
        """:func:`~connector.groups.lag.state_lag` of ``state``, on the tails as last described.

        The segments behind their tails are counted by the store in one
        call; the others are caught up, with no call. Asked again for the
        same ``state`` object while no tail changed, it answers the lag it
        counted then, with no call and no look over the segments; asked for
        a state whose segments are those it counted last, it counts again
        only the segments whose cursor or tail changed since (after an idle
        tick, those the tick moved).
        """
        last = self._lag
        if assignments is None and last is not None:
            generation, counted, lag = last
            if generation == self._generation and counted is state:
                return lag
            moved = self._moved_since(counted, state, generation)
            if moved is not None:
                lag = _with_moved(lag, self._lag_of(replace(state, cursors=moved)))
                self._lag = (self._generation, state, lag)
                return lag
        lag = self._lag_of(state, assignments)
        if assignments is None:
            self._lag = (self._generation, state, lag)
        return lag

    def _lag_of(self, state: GroupState, assignments: Mapping[str, str] | None = None) -> GroupLag:
        return state_lag(state, self.plans(lag_plans(state)), assignments)

    def _moved_since(
        self, counted: GroupState, state: GroupState, generation: int
    ) -> dict[str, SegmentCursor] | None:
        """The cursors of ``state`` whose lag may differ from their lag at ``counted``.

        Those that are other objects than ``counted``'s, and those whose
        tails changed after ``generation``. None when the lag of ``state``
        must be counted whole: other segments, successors waiting, or the
        changes of the tails not known.
        """
        changed = self.changed_since(generation)
        mine, theirs = state.cursors, counted.cursors
        if changed is None or state.waiting or counted.waiting or mine.keys() != theirs.keys():
            return None
        return {s: c for s, c in mine.items() if c is not theirs[s] or s in changed}

    def _describe(self, wait_ms: int = 0) -> bool:
        """Brings the tails up to date with one call; returns whether any changed."""
        asked = [self._known.get(s, s) for s in self._streams]
        changed = False
        names: set[str] | None = set()
        answers = self._client.describe_tails(asked, wait_ms=wait_ms)
        for stream, answer in zip(self._streams, answers, strict=True):
            if isinstance(answer, TidemarkError):
                raise answer
            self._known[stream] = replace(answer, segments=())
            if not (answer.complete or answer.segments):
                continue  # nothing changed: nothing to merge
            if answer.complete:
                names = None
            elif names is not None:
                names.update(tail.segment for tail in answer.segments)
            segments = {} if answer.complete else self._by_stream[stream]
            new = any(tail.segment not in segments for tail in answer.segments)
            segments.update((tail.segment, tail) for tail in answer.segments)
            if new:  # known segments keep their places: sort only when one is new
                segments = dict(sorted(segments.items(), key=_number))
            self._by_stream[stream] = segments
            changed = True
        if changed:
            self._generation += 1
            self._changes[self._generation] = None if names is None else frozenset(names)
            self._changes.pop(self._generation - _CHANGES_KEPT, None)
        if changed or self._view is None:
            self._view = MappingProxyType(
                {n: t for segments in self._by_stream.values() for n, t in segments.items()}
            )
            return True
        return False

    def _unknown_successors(self) -> set[str]:
        view = self._view or {}
        return {
            successor
            for tail in view.values()
            if tail.sealed
            for successor in tail.successors
            if successor not in view
        }


def _with_moved(lag: GroupLag, moved: GroupLag) -> GroupLag:
    """``lag`` with the segments of ``moved`` counted anew, in ``lag``'s order."""
    if not moved.segments:
        return lag
    fresh = {segment.segment: segment for segment in moved.segments}
    return GroupLag(tuple(fresh.get(s.segment, s) for s in lag.segments))


def _number(item: tuple[str, SegmentTail]) -> int:
    return SegmentId.parse(item[0]).number


class TailPlans:
    """``plan_read`` for one planning pass, from the tails and from one batch fetched beforehand.

    Called as ``plans(segment, offset, max_events=None, max_bytes=None)``,
    it answers as :meth:`StoreClient.plan_read` would and raises what it
    would: from the tails when ``offset`` is the segment's tail there (no
    call), from the answers :meth:`fetch` got, or with a call of its own.
    """

    def __init__(self, client: StoreClient, tails: Mapping[str, SegmentTail]):
        self._client = client
        self._tails = tails
        self._fetched: dict[PlanRequest, PlannedRead | TidemarkError] = {}
        self._reached: dict[tuple[str, int], PlannedRead] = {}  # plans that reached the tail

    def fetch(self, requests: Iterable[PlanRequest]) -> None:
        """Fetches the plans of ``requests`` in one ``PlanReads`` call (none at their tails)."""
        wanted = [
            r
            for r in dict.fromkeys(requests)
            if r not in self._fetched and self._known(r.segment, r.offset, r) is None
        ]
        for start in range(0, len(wanted), MAX_ITEMS_PER_CALL):
            chunk = wanted[start : start + MAX_ITEMS_PER_CALL]
            for request, answer in zip(chunk, self._client.plan_reads(chunk), strict=True):
                self._fetched[request] = answer
                if isinstance(answer, PlannedRead) and answer.at_tail:
                    self._reached[(request.segment, request.offset)] = answer

    def __call__(
        self,
        segment: str,
        offset: int,
        max_events: int | None = None,
        max_bytes: int | None = None,
    ) -> PlannedRead:
        """The plan of a read of ``segment`` from ``offset`` under the budget (None: no limit)."""
        request = PlanRequest(segment, offset, max_events, max_bytes)
        known = self._known(segment, offset, request)
        if known is not None:
            return known
        answer = self._fetched.get(request)
        if isinstance(answer, TidemarkError):
            del self._fetched[request]  # raised once; asked again, the store answers
            raise answer
        if answer is not None:
            return answer
        return self._client.plan_read(segment, offset, max_events, max_bytes)

    def _known(self, segment: str, offset: int, request: PlanRequest) -> PlannedRead | None:
        """The plan without a call: at the tail, or one that reached it and fits the budget."""
        tail = self._tails.get(segment)
        if tail is not None and offset == tail.write_offset and request.before_time is None:
            return _at_tail(tail)
        reached = self._reached.get((segment, offset))
        if reached is not None and _fits(reached, request):
            return reached
        return None


def _at_tail(tail: SegmentTail) -> PlannedRead:
    """What the store plans from a segment's tail: no event, the tail's watermarks, its end."""
    return PlannedRead(
        segment=tail.segment,
        offset=tail.write_offset,
        next_offset=tail.write_offset,
        events=0,
        watermark=tail.watermark,
        end_of_segment=tail.sealed,
        at_tail=True,
        successors=tail.successors if tail.sealed else (),
        event_time_watermark=tail.event_time_watermark,
    )


def _fits(plan: PlannedRead, request: PlanRequest) -> bool:
    """Whether ``plan``, which reached the tail, is also the plan under ``request``'s budget."""
    return (
        request.before_time is None
        and (request.max_events is None or plan.events <= request.max_events)
        and (request.max_bytes is None or plan.next_offset - plan.offset <= request.max_bytes)
    )
