"""The lifecycle of a read, planned for every host: start, next, end, and the tasks between.

A :class:`SourcePlanner` plans a :class:`~connector.reader.source.spec.ReadSpec`
with a store client. It keeps no frontier of its own: every call takes the
frontier to plan from and returns a new one, so a host plans again from any
frontier it checkpointed (Spark's offsets, Flink's keyed state). What it
keeps between calls is what never goes stale, the segments' descriptions
(lineage does not change), and the segments' tails as last described
(:attr:`SourcePlanner.tails`, a :class:`~connector.reader.tails.TailCache`),
which each plan brings up to date with one call that answers only what
changed: a plan over idle segments costs the store one small call, however
many segments the streams have. Nor does it cost the host a look over the
segments: a plan from the frontier the last plan started from, while no
tail changed, is that plan again, and a plan that moves nothing returns the
frontier it started from, the same object (:meth:`SourcePlanner.next`).
From a frontier at every tail, the next plan looks only at the segments
whose tails changed (:meth:`TailCache.changed_since`), unless one got
events under a budget, sealed or came: then every segment is planned.

Hosts call it once per batch: Spark's driver :meth:`~SourcePlanner.next` in
``latestOffset`` and :meth:`~SourcePlanner.tasks` in ``partitions``; Flink's
coordinator :meth:`~SourcePlanner.step` per epoch, whose tasks reuse the
pieces the budget measured instead of asking the store again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from connector.client.connection import StoreClient
from connector.groups.percentile import PERFECT, counts_between
from connector.groups.state import GroupState, SegmentCursor, writers_event_time
from connector.model import SegmentTail, initial_watermark
from connector.reader.events import TimeDomain
from connector.reader.lineage import KnownSegments, ancestors, describe_streams, lineage_lane
from connector.reader.source.budget import advance_within
from connector.reader.source.cuts import (
    StreamCut,
    by_name,
    segment_tails,
    start_state,
    state_at_time,
)
from connector.reader.source.frontier import Frontier
from connector.reader.source.limits import Budget
from connector.reader.source.ranges import SegmentRange, chains_of, ranges_between, split_range
from connector.reader.source.spec import ReadSpec
from connector.reader.source.tasks import ReadTask
from connector.reader.tails import TailCache
from connector.reader.unread_work import group_work

__all__ = ["SourcePlanner", "Step"]


class Step(NamedTuple):
    """One batch: the frontier after it and the tasks that read it."""

    frontier: Frontier
    tasks: tuple[ReadTask, ...]


_Advance = tuple[Frontier, dict[str, tuple[SegmentRange, ...]]]


class _Planned(NamedTuple):
    """An advance, and whether its end is at every segment's tail (nothing left to read)."""

    end: Frontier
    pieces: dict[str, tuple[SegmentRange, ...]]
    caught_up: bool


def _same(key: tuple[object, ...], other: tuple[object, ...]) -> bool:
    """Whether two memo keys match: numbers and budgets equal, frontiers the same object."""
    return all(
        a is b if isinstance(a, Frontier) else a == b for a, b in zip(key, other, strict=True)
    )


def _same_tail(previous: Frontier, before: Frontier, its_tail: Frontier) -> bool:
    """Whether ``previous`` has the tail ``its_tail`` had, but for the watermark and new tails.

    A tail depends on the frontier it is taken from only by its finished
    segments and their ends (and its watermark, which is taken again): so
    for ``its_tail`` itself, and for any frontier that finished what
    ``before`` (the frontier ``its_tail`` was taken from) finished, with the same ends.
    """
    return previous is its_tail or (
        previous.state.finished == before.state.finished and previous.ends == before.ends
    )


class SourcePlanner:
    """Plans a read of ``spec`` against the store behind ``client``; see the module docstring.

    Not thread-safe: one host thread plans. :attr:`tails` holds the tails
    the last plan described; a host counts its lag on them
    (:meth:`TailCache.lag`) without describing them again.
    """

    def __init__(self, client: StoreClient, spec: ReadSpec):
        self.client = client
        self.spec = spec
        self.tails = TailCache(client, spec.stream_names)
        self._known = KnownSegments()
        #: The last advance: (tails' generation, previous, budget) -> (end, pieces).
        self._last: tuple[tuple[int, Frontier, Budget], _Planned] | None = None
        self._last_tail: tuple[tuple[int, Frontier], Frontier] | None = None

    def start(self) -> Frontier:
        """Where the read starts: the spec's start cut.

        Raises:
            InvalidArgumentError: the cut names a segment the streams do not
                have (naming the engine's start option).
        """
        state = self.spec.names.checked(
            "start", lambda: start_state(self.client, self.spec.stream_names, self.spec.start)
        )
        return Frontier(state, {}, self.spec.time.advanced(state, None))

    def next(
        self,
        previous: Frontier,
        budget: Budget | None = None,
        until: Frontier | None = None,
        wait_ms: int = 0,
    ) -> Frontier:
        """The end of the batch after ``previous``: the tail now, or within ``budget``.

        ``budget`` defaults to the spec's; without any limit the end is
        everything in the streams now. ``until`` (Spark's
        ``Trigger.AvailableNow``) is a frontier no end passes: an end that
        would is clipped to it. The watermark never steps back. When nothing
        moved the end is ``previous`` itself (``end is previous``). With
        ``wait_ms``, a description that finds no tail changed waits for one,
        at most ``wait_ms`` (:meth:`TailCache.refresh`).
        """
        end, _ = self._advance(previous, budget, wait_ms)
        return end if until is None else end.clipped_to(until, previous)

    def step(self, previous: Frontier, budget: Budget | None = None, wait_ms: int = 0) -> Step:
        """:meth:`next` and the :meth:`tasks` that read up to it, in one plan.

        The tasks' pieces are the steps the budget measured: splitting them
        asks the store nothing more. ``wait_ms`` is :meth:`next`'s: a
        description that finds no tail changed waits for one, at most that long.
        """
        end, pieces = self._advance(previous, budget, wait_ms)
        return Step(end, self._tasks(previous, end, pieces))

    def _advance(self, previous: Frontier, budget: Budget | None, wait_ms: int = 0) -> _Advance:
        """The end after ``previous`` within ``budget``, and the pieces that lead there.

        The tails are described first (one call); while none changed, an
        advance from the same ``previous`` object is the last one, and no
        segment is looked at. An end equal to ``previous`` is ``previous``.
        """
        budget = self.spec.budget if budget is None else budget
        self.tails.refresh(wait_ms)
        key = (self.tails.generation, previous, budget)
        last = self._last
        if last is not None and _same(last[0], key):
            return last[1].end, last[1].pieces
        if budget.unlimited:
            end, pieces = self._at_percentile(previous, self.tail(previous, refresh=False)), {}
        else:
            after = None
            if last is not None and last[1].caught_up and last[1].end is previous:
                after = self._idle_after(previous, last[0][0])
            if after is not None:
                end, pieces = after, {}
            else:
                step = self.spec.task_size
                end, pieces = advance_within(
                    self.client, previous, budget, self.spec.time, step, self.tails
                )
            end = self._at_percentile(previous, end)
        if not pieces and end == previous:
            end = previous
        self._last = (key, _Planned(end, pieces, self._caught_up(end)))
        return end, pieces

    def _caught_up(self, end: Frontier) -> bool:
        """Whether every segment of ``end`` is readable at its tail as last described."""
        state, tails = end.state, self.tails.described()
        if state.waiting or state.end_cut is not None or state.bounded_to is not None:
            return False
        for segment, cursor in state.cursors.items():
            tail = tails.get(segment)
            if tail is None or tail.sealed or cursor.offset != tail.write_offset:
                return False
        return True

    def _idle_after(self, previous: Frontier, generation: int) -> Frontier | None:
        """The advance from ``previous``, caught up at ``generation``, when no event came since.

        Each segment whose tail changed takes the tail's watermarks, as
        :func:`advance_within` would make it (a plan at the tail), and the
        others stay as they are. None when that is not known, or a tail
        changed by more than its watermarks (an event, a seal, a new
        segment): then :func:`advance_within` plans.
        """
        changed = self.tails.changed_since(generation)
        if changed is None:
            return None
        tails, cursors = self.tails.described(), dict(previous.state.cursors)
        for segment in changed:
            tail, cursor = tails[segment], cursors.get(segment)
            if cursor is None or tail.sealed or tail.write_offset != cursor.offset:
                return None
            event_time = writers_event_time(tail.event_time_watermark)
            watermark = max(cursor.watermark, tail.watermark)
            cursors[segment] = replace(cursor, watermark=watermark, event_time=event_time)
        state = replace(previous.state, cursors=cursors)
        return Frontier(state, previous.ends, self.spec.time.advanced(state, previous.watermark))

    def _at_percentile(self, previous: Frontier, end: Frontier) -> Frontier:
        """``end`` with the watermark at the spec's percentile (below 1), over the work after it.

        The store tells the work of every unfinished segment from ``end``
        (one call); without it the perfect watermark stays. In the
        ingestion-time domain the run's counts go on from ``previous``'s: the
        events between the two frontiers (the work from ``previous`` less
        the work from ``end``, both told now: one call more) were read
        under ``previous``'s watermark, and those below it came out late
        (:func:`~connector.groups.percentile.counts_between`).
        """
        time = self.spec.time
        if time.percentile == PERFECT or not time.has_watermarks:
            return end
        work = group_work(self.client, end.state)
        run = previous.run
        passed = time.group_time_passed(previous.watermark)
        if work is not None and time.domain is TimeDomain.INGESTION_TIME:
            before = group_work(self.client, previous.state)
            if before is not None:
                run = counts_between(run, before, work, passed)
        watermark = time.advanced(end.state, previous.watermark, work=work, run=run)
        return replace(end, watermark=watermark, run=run)

    def tail(self, previous: Frontier, *, refresh: bool = True) -> Frontier:
        """Everything in the streams now: open segments at their tails, sealed ones finished.

        Depends on ``previous`` only for its finished segments, which stay
        finished (what was before the start is never read), its ends and
        its watermark. The tails are described again (one call, answering
        what changed); with ``refresh`` False they are those the last plan
        described (no call). A segment sealed by a scale comes with its
        successors, or the group watermark would skip them and pass their
        events (:meth:`TailCache.refresh`). A tail equal to ``previous`` is
        ``previous``; while no tail changed, the tail of the same ``previous``
        object is the last one, with no look over the segments.
        """
        tails = self.tails.refresh() if refresh else self.tails.described()
        key = (self.tails.generation, previous)
        last = self._last_tail
        if last is not None and _same(last[0], key):
            return last[1]
        planned = self._last
        if planned is not None and planned[1].caught_up and planned[1].end is previous:
            if planned[0][0] == self.tails.generation and self.spec.time.percentile == PERFECT:
                return previous  # planned to every tail as described: its own tail
        end = None
        if last is not None and _same_tail(previous, last[0][1], last[1]):
            end = self._tail_after(previous, last[1], last[0][0], tails)  # only what changed
        if end is None:
            end = self._tail(previous, tails)
        if end == previous:
            end = previous
        self._last_tail = (key, end)
        return end

    def _tail_after(
        self,
        previous: Frontier,
        known: Frontier,
        generation: int,
        tails: Mapping[str, SegmentTail],
    ) -> Frontier | None:
        """:meth:`_tail` of ``previous``: ``known``, its tail at ``generation``, and the changes.

        None when that is not known, or a segment sealed or came since (then
        :meth:`_tail` looks at every segment).
        """
        changed = self.tails.changed_since(generation)
        if changed is None:
            return None
        cursors = dict(known.state.cursors)
        for segment in changed:
            tail = tails[segment]
            if tail.sealed or segment not in cursors:
                return None
            event_time = writers_event_time(tail.event_time_watermark)
            cursors[segment] = SegmentCursor(tail.write_offset, tail.watermark, None, event_time)
        state = replace(known.state, cursors=cursors)
        return Frontier(state, known.ends, self.spec.time.advanced(state, previous.watermark))

    def _tail(self, previous: Frontier, tails: Mapping[str, SegmentTail]) -> Frontier:
        cursors: dict[str, tuple[int, int, int]] = {}
        finished = set(previous.state.finished)
        ends = dict(previous.ends)
        for tail in tails.values():
            if tail.segment in previous.state.finished:
                continue
            if tail.sealed:
                finished.add(tail.segment)
                ends[tail.segment] = tail.write_offset
            else:
                event_time = writers_event_time(tail.event_time_watermark)
                cursors[tail.segment] = (tail.write_offset, tail.watermark, event_time)
        state = GroupState.starting_at(
            {s: o for s, (o, _, _) in cursors.items()},
            {s: w for s, (_, w, _) in cursors.items()},
            event_times={s: e for s, (_, _, e) in cursors.items()},
        )
        state = replace(state, finished=frozenset(finished))
        return Frontier(state, ends, self.spec.time.advanced(state, previous.watermark))

    def end(self, start: Frontier) -> Frontier:
        """Where a bounded read from ``start`` ends: its end cut, by default the tail now.

        At an explicit cut: the cut's segments there, their ancestors read whole.
        At a time: before each segment's first event ingested then or later,
        the segments wholly before it read whole.

        Raises:
            InvalidArgumentError: the cut names a segment the streams do not
                have (naming the engine's end option).
        """
        cut = self.spec.end
        if cut is None or cut.is_latest:
            return self.tail(start)
        if cut.kind == "time":
            assert cut.time_ms is not None
            at = state_at_time(self.client, self.spec.stream_names, cut.time_ms)
            return Frontier(at.state, at.ends, self.spec.time.advanced(at.state, None))
        return self.spec.names.checked("end", lambda: self._at_cut(cut))

    def _at_cut(self, cut: StreamCut) -> Frontier:
        segments = by_name(describe_streams(self.client, self.spec.stream_names))
        offsets = cut.as_dict()
        before = ancestors(segments, offsets)
        tails = segment_tails(self.client, self.spec.stream_names) if before else {}
        ends = {name: tails[name].write_offset for name in before}
        watermarks = {name: initial_watermark(segments[name].creation_time) for name in offsets}
        state = replace(GroupState.starting_at(offsets, watermarks), finished=frozenset(before))
        return Frontier(state, ends, self.spec.time.advanced(state, None))

    def tasks(self, begin: Frontier, end: Frontier) -> tuple[ReadTask, ...]:
        """The read tasks of the events between ``begin`` and ``end``, in the order they are read.

        One task per lineage chain (successors after their predecessors)
        or, with a task size in the spec, per piece of at most that size
        (the store says where whole events end), every piece of a chain in
        its lane. Each carries ``begin``'s watermark as the one in force.
        """
        return self._tasks(begin, end, {})

    def _tasks(
        self, begin: Frontier, end: Frontier, measured: dict[str, tuple[SegmentRange, ...]]
    ) -> tuple[ReadTask, ...]:
        ranges = ranges_between(begin, end)
        if not ranges:
            return ()
        segments = self._known.covering(self.client, [r.segment for r in ranges])
        tasks = []
        for chain in chains_of(segments, ranges):
            lane = lineage_lane(segments, chain[0].segment)
            if self.spec.task_size.unlimited:
                tasks.append(ReadTask(lane, tuple(chain), begin.watermark))
                continue
            for segment_range in chain:
                for piece in self._pieces(segment_range, measured.get(segment_range.segment, ())):
                    tasks.append(ReadTask(lane, (piece,), begin.watermark))
        return tuple(tasks)

    def _pieces(
        self, segment_range: SegmentRange, measured: tuple[SegmentRange, ...]
    ) -> Sequence[SegmentRange]:
        """``segment_range`` in pieces of the task size: the measured ones when they cover it."""
        if (
            measured
            and measured[0].start == segment_range.start
            and measured[-1].stop == segment_range.stop
        ):
            return measured
        return split_range(self.client, segment_range, self.spec.task_size)
