"""Advancing a frontier within a budget of events and bytes: measure, then decide.

Each round of :func:`advance_within`:

1. :func:`measure` asks the store, and nothing else does: each readable
   segment, oldest watermark first, is planned from its cursor with what
   the budget has left after the segments before it (whole events, at
   least one; :meth:`StoreClient.plan_read`, a lookup in the store's index,
   no event read back), in steps of at most ``step`` (a task's size, so the
   steps are the pieces tasks read and splitting asks nothing more); once
   the budget is covered the others are only probed, for the watermark at
   their tails or their ends; a segment that ends has its successors
   described. The plans come from a :class:`~connector.reader.tails.TailPlans`:
   a segment at its tail is planned from the tails described, with no
   call, and the first steps of the others, then the probes, are asked in
   one call each.
2. :func:`decide` is pure: which steps are taken, where each cursor goes
   with what watermark, which segments end. An event larger than the byte
   budget is taken alone, as the only event of an advance, or no advance
   could ever take it. Segments with nothing left to read still move:
   their watermark becomes the store's at their tail (idle ticks included)
   and a sealed one is finished, whatever the budget, so event time
   advances on idle streams under a budget too.
3. :func:`apply` makes the new group state; successors of the segments
   finished come in once all their predecessors are finished, and the next
   round measures them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from connector.client.connection import StoreClient
from connector.groups.lag import Planner
from connector.groups.state import (
    GroupState,
    ReportedPosition,
    SegmentCursor,
    Successor,
    advance_all,
    finish_all,
    plan_cut,
    unassigned_oldest_first,
    writers_event_time,
)
from connector.model import PlannedRead, PlanRequest
from connector.reader.lineage import successors_of
from connector.reader.source.frontier import Frontier
from connector.reader.source.limits import Budget
from connector.reader.source.ranges import SegmentRange
from connector.reader.source.timekeeping import TimeKeeping
from connector.reader.tails import TailCache, TailPlans

__all__ = ["Decision", "Left", "Measured", "advance_within", "apply", "decide", "measure"]


class Left(NamedTuple):
    """What a budget has left: events and bytes (None: no limit); may fall below zero."""

    events: int | None
    bytes: int | None

    @classmethod
    def of(cls, budget: Budget) -> Left:
        """All of ``budget``."""
        return cls(budget.max_events, budget.max_bytes)

    @property
    def covered(self) -> bool:
        """Whether nothing is left."""
        return (self.events is not None and self.events <= 0) or (
            self.bytes is not None and self.bytes <= 0
        )

    def admits(self, plan: PlannedRead) -> bool:
        """Whether ``plan``'s events fit in what is left."""
        return (self.events is None or plan.events <= self.events) and (
            self.bytes is None or plan.next_offset - plan.offset <= self.bytes
        )

    def minus(self, plan: PlannedRead) -> Left:
        """What is left once ``plan``'s events are taken."""
        return Left(
            None if self.events is None else self.events - plan.events,
            None if self.bytes is None else self.bytes - (plan.next_offset - plan.offset),
        )


@dataclass(frozen=True)
class Measured:
    """What the store said of one segment from its cursor.

    Attributes:
        steps: consecutive plans from the cursor, the last at the budget's
            end, the segment's tail or its end; one plan of one event for a
            probe.
        probe: only probed: the budget was covered before this segment.
        successors: the segment's successors, when the last step ends it.
    """

    segment: str
    steps: tuple[PlannedRead, ...]
    probe: bool = False
    successors: tuple[Successor, ...] = ()


@dataclass(frozen=True)
class Decision:
    """What one round takes; :func:`apply` makes it the new state.

    Attributes:
        reached: segment -> (offset, watermark) where its cursor goes.
        ended: the segments finished, with their successors.
        pieces: the ranges taken per segment, one per step, in order.
        left: what the budget has left after the round.
        planned_any: whether any event is taken so far in the advance.
        again: segments stopped short of their tails: measure them again
            while the budget lasts.
        event_times: segment -> the writers' event time where its cursor goes.
    """

    reached: Mapping[str, tuple[int, int]]
    ended: Mapping[str, tuple[Successor, ...]]
    pieces: Mapping[str, tuple[SegmentRange, ...]]
    left: Left
    planned_any: bool
    again: frozenset[str] = field(default_factory=frozenset)
    event_times: Mapping[str, int] = field(default_factory=dict)


def measure(
    client: StoreClient,
    state: GroupState,
    order: Sequence[str],
    left: Left,
    step: Budget,
    seen: set[str],
    plans: TailPlans | None = None,
) -> list[Measured]:
    """The store's plans of the segments of ``order`` (oldest first), within ``left``.

    Each segment is planned in steps of at most ``step`` until what is left
    is covered or it reaches its tail, its end or its end cut; once the
    budget is covered the rest are probed (one event), except those already
    in ``seen`` (measured earlier in this advance), which are left out.
    ``seen`` gets every segment measured. ``plans`` (by default the
    client's ``plan_read``) answers; the first steps, then the probes, are
    fetched in one call each.
    """
    plan = client.plan_read if plans is None else plans
    if plans is not None and not left.covered:
        plans.fetch(_from_cursors(state, order, *_sizes(left, step)))
    measured = []
    probing = False
    for i, segment in enumerate(order):
        cursor = state.cursors[segment]
        if left.covered:
            if segment in seen:
                continue
            if plans is not None and not probing:
                plans.fetch(_from_cursors(state, [s for s in order[i:] if s not in seen], 1, None))
                probing = True
            steps = (_plan(plan, segment, cursor, cursor.offset, 1, None),)
            probe = True
        else:
            steps, left = _steps(plan, segment, cursor, left, step)
            probe = False
        seen.add(segment)
        last = steps[-1]
        successors = (
            tuple(successors_of(client, segment, last.successors)) if last.end_of_segment else ()
        )
        measured.append(Measured(segment, steps, probe, successors))
    return measured


def _steps(
    plan: Planner, segment: str, cursor: SegmentCursor, left: Left, step: Budget
) -> tuple[tuple[PlannedRead, ...], Left]:
    steps: list[PlannedRead] = []
    offset = cursor.offset
    while not left.covered:
        planned = _plan(plan, segment, cursor, offset, *_sizes(left, step))
        steps.append(planned)
        left = left.minus(planned)
        offset = planned.next_offset
        if planned.events == 0 or planned.at_tail or planned.end_of_segment:
            break
        if cursor.end is not None and offset >= cursor.end:
            break
    return tuple(steps), left


def _sizes(left: Left, step: Budget) -> tuple[int | None, int | None]:
    """The events and bytes of the next step: at most ``step``, at most what is left."""
    return _least(step.max_events, left.events), _least(step.max_bytes, left.bytes)


def _plan(
    plan: Planner,
    segment: str,
    cursor: SegmentCursor,
    offset: int,
    events: int | None,
    size: int | None,
) -> PlannedRead:
    """The store's plan of ``segment`` from ``offset``, never past its end cut."""
    request = _request(segment, cursor, offset, events, size)
    return plan(segment, offset, request.max_events, request.max_bytes)


def _request(
    segment: str, cursor: SegmentCursor, offset: int, events: int | None, size: int | None
) -> PlanRequest:
    """The plan of ``segment`` from ``offset`` that :func:`_plan` asks for."""
    if cursor.end is not None:
        room = max(cursor.end - offset, 1)
        size = room if size is None else min(size, room)
    return PlanRequest(segment, offset, events, size)


def _from_cursors(
    state: GroupState, segments: Sequence[str], events: int | None, size: int | None
) -> Iterator[PlanRequest]:
    """The plans from the cursors of ``segments`` under the budget, as :func:`_plan` asks."""
    for segment in segments:
        cursor = state.cursors[segment]
        yield _request(segment, cursor, cursor.offset, events, size)


def _least(*limits: int | None) -> int | None:
    given = [limit for limit in limits if limit is not None]
    return max(min(given), 1) if given else None


def decide(
    state: GroupState, measured: Sequence[Measured], left: Left, planned_any: bool
) -> Decision:
    """Which measured steps are taken, oldest watermark first, within ``left``.

    Steps are taken in order while they fit; the first event of an advance
    is taken even when it is larger than the byte budget. A segment with
    nothing to take at its tail takes the tail's watermark; one whose taken
    (or only) plan reaches its end is finished.
    """
    reached: dict[str, tuple[int, int]] = {}
    event_times: dict[str, int] = {}
    ended: dict[str, tuple[Successor, ...]] = {}
    pieces: dict[str, tuple[SegmentRange, ...]] = {}
    again: set[str] = set()
    for entry in measured:
        taken: list[PlannedRead] = []
        if not entry.probe:
            for plan in entry.steps:
                alone = not planned_any and not taken and plan.events == 1
                if plan.events == 0 or not (left.admits(plan) or alone):
                    break
                taken.append(plan)
                left = left.minus(plan)
                planned_any = True
        first = entry.steps[0]
        final = taken[-1] if taken else first if first.events == 0 else None
        if final is not None:
            reached[entry.segment] = (final.next_offset, final.watermark)
            event_times[entry.segment] = writers_event_time(final.event_time_watermark)
        if final is not None and final.end_of_segment:
            ended[entry.segment] = entry.successors
        elif taken and len(taken) == len(entry.steps) and not taken[-1].at_tail:
            again.add(entry.segment)
        if taken:
            pieces[entry.segment] = tuple(
                SegmentRange(entry.segment, p.offset, p.next_offset) for p in taken
            )
    return Decision(reached, ended, pieces, left, planned_any, frozenset(again), event_times)


def apply(
    state: GroupState, ends: Mapping[str, int], decision: Decision
) -> tuple[GroupState, dict[str, int]]:
    """The group state and segment ends after ``decision``; pure."""
    ends = dict(ends)
    reachable = {segment: offset for segment, (offset, _) in decision.reached.items()}
    positions: dict[str, ReportedPosition] = {}
    for segment, offset in plan_cut(state, reachable).items():
        if segment in reachable:
            # Held back by an end cut, a cursor stops short of the plan: its event time
            # there is not known.
            known = offset == reachable[segment]
            event_time = decision.event_times.get(segment) if known else None
            positions[segment] = (offset, decision.reached[segment][1], event_time)
    state = advance_all(state, positions)
    for segment in decision.ended:
        ends[segment] = state.cursors[segment].offset
    return finish_all(state, decision.ended), ends


def advance_within(
    client: StoreClient,
    previous: Frontier,
    budget: Budget,
    time: TimeKeeping,
    step: Budget | None = None,
    tails: TailCache | None = None,
) -> tuple[Frontier, dict[str, tuple[SegmentRange, ...]]]:
    """At most ``budget``'s events and bytes beyond ``previous``, oldest watermark first.

    Returns the frontier and, per segment, the pieces of at most ``step``
    that lead there from ``previous`` (the measured steps taken). Segments
    at their end cuts are finished; successors are read only once all their
    predecessors are finished within the advance. With ``tails`` (described
    by the caller before the advance), segments at their tails are planned
    from them and the others' plans are asked in batches: an advance over
    idle segments asks the store nothing.
    """
    state, ends = previous.state, dict(previous.ends)
    left, planned_any = Left.of(budget), False
    seen: set[str] = set()
    pieces: dict[str, tuple[SegmentRange, ...]] = {}
    to_measure = set(state.cursors)
    while to_measure:
        order = [s for s in unassigned_oldest_first(state, ()) if s in to_measure]
        at_end = {s for s in order if state.cursors[s].at_end_cut}
        plans = None if tails is None else tails.plans()
        readable = [s for s in order if s not in at_end]
        measured = measure(client, state, readable, left, step or Budget(), seen, plans)
        decision = decide(state, measured, left, planned_any)
        decision = _with_ended(decision, at_end)
        before = set(state.cursors)
        state, ends = apply(state, ends, decision)
        left, planned_any = decision.left, decision.planned_any
        for segment, taken in decision.pieces.items():
            pieces[segment] = pieces.get(segment, ()) + taken
        brought_in = set(state.cursors) - before
        to_measure = brought_in - seen if left.covered else set(decision.again) | brought_in
    frontier = Frontier(state, ends, time.advanced(state, previous.watermark))
    return frontier, pieces


def _with_ended(decision: Decision, at_end_cut: set[str]) -> Decision:
    """``decision`` with the segments at their end cuts finished (no successor is read)."""
    if not at_end_cut:
        return decision
    ended = {**decision.ended, **dict.fromkeys(at_end_cut, ())}
    return replace(decision, ended=ended)
