"""Reader group membership: the group's shared record and pure rules over it.

A group's record (:class:`~connector.groups.record.GroupRecord`: its state, which
reader holds which segment, reader leases, a pending checkpoint, finished
checkpoints) changes only through the functions here. Each takes the record
as stored and the store's time ``now`` (epoch ms) and returns the record to
store; none does I/O, so the group applies them with compare-and-set and may
run one several times on concurrent updates. Leases run on the store's clock.

What a :class:`~connector.reader.reader.EventReader` needs of its group is
:class:`GroupHandle`: its name, its store client, and atomic updates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from connector.client.connection import StoreClient
from connector.errors import FailedPreconditionError, TidemarkError
from connector.groups.record import GroupRecord
from connector.groups.state import (
    GroupState,
    Successor,
    advance_all,
    finish_all,
    stream_cut,
    unassigned_oldest_first,
)

__all__ = [
    "GroupHandle",
    "Positions",
    "ReaderGroupResetError",
    "cancel_checkpoint",
    "complete_checkpoint",
    "leave",
    "rebalance",
    "report",
    "request_checkpoint",
    "reset",
    "sync",
]

#: A reader's consumed position per held segment: ``segment -> (offset, watermark)``
#: or ``(offset, watermark, event time)``, the writers' event time there (see
#: ``SegmentCursor``; None or left out: not known).
Positions = Mapping[str, tuple[int, int] | tuple[int, int, int | None]]


class ReaderGroupResetError(TidemarkError):
    """The group was reset or deleted; readers from before must be recreated."""


class GroupHandle(Protocol):
    """What a reader needs of its group: see :class:`~connector.reader.group.ReaderGroup`."""

    @property
    def name(self) -> str:
        """The group's name, for messages."""
        ...

    @property
    def client(self) -> StoreClient:
        """The store the group's streams live in."""
        ...

    def record(self) -> GroupRecord:
        """The record as stored now; ReaderGroupResetError when the group is gone."""
        ...

    def update(self, change: Callable[[GroupRecord, int], GroupRecord]) -> GroupRecord:
        """Applies ``change(record, now)`` atomically and returns the stored record."""
        ...


# --- a reader's rules -------------------------------------------------------------------


def report(record: GroupRecord, reader: str, positions: Positions) -> GroupState:
    """The state with ``reader``'s positions of the segments it still holds.

    Positions of segments it no longer holds are ignored (another reader
    took them over); offsets and watermarks never step back. The cursor
    table is copied at most once, whatever the number of positions.
    """
    state = record.state
    held = {
        segment: (position[0], position[1], position[2] if len(position) > 2 else None)
        for segment, position in positions.items()
        if record.assignments.get(segment) == reader and segment in state.cursors
    }
    return advance_all(state, held)


def rebalance(
    state: GroupState,
    assignments: Mapping[str, str],
    reader: str,
    readers: int,
    held: int | None = None,
) -> Mapping[str, str]:
    """``reader`` takes or gives back segments toward an equal share, oldest watermark first.

    ``held`` is how many segments ``reader`` holds in ``assignments``, when
    known. When nothing moves (``reader`` holds its share, or less with no
    segment free) ``assignments`` itself is returned, and with ``held``
    given that costs nothing per segment.
    """
    share = math.ceil(len(state.cursors) / max(readers, 1))
    if held is None:
        held = sum(1 for r in assignments.values() if r == reader)
    if held == share or (held < share and len(assignments) >= len(state.cursors)):
        return assignments
    result = dict(assignments)
    mine = [s for s, r in result.items() if r == reader]
    if len(mine) > share:
        mine.sort(key=lambda s: (state.cursors[s].watermark, s))
        for segment in mine[share:]:
            del result[segment]
    elif len(mine) < share:
        for segment in unassigned_oldest_first(state, result)[: share - len(mine)]:
            result[segment] = reader
    return result


def sync(
    record: GroupRecord,
    reader: str,
    positions: Positions,
    now: int,
    *,
    generation: int,
    finished: Mapping[str, Sequence[Successor]],
    lease_ms: int,
) -> GroupRecord:
    """One periodic sync of ``reader``: report, finish, renew, expire, rebalance, acknowledge.

    - ``positions`` are recorded for the segments ``reader`` still holds;
    - each segment in ``finished`` (read to its end, with its successors)
      that ``reader`` holds is finished, bringing in successors whose
      predecessors are all finished;
    - ``reader``'s lease is renewed once half of it has run (not every
      sync, so an idle group does not write on every sync); leases that
      ran out by ``now`` are dropped with their readers' segments;
    - ``reader`` takes or gives back segments toward an equal share;
    - a pending checkpoint is acknowledged by ``reader`` (its positions
      are in the record) and forgotten for readers whose lease ran out.

    Raises:
        ReaderGroupResetError: the record's generation is not ``generation``
            (the group was reset since the reader joined).
    """
    if record.generation != generation:
        msg = "the reader group was reset; create a new reader"
        raise ReaderGroupResetError(msg)
    state = report(record, reader, positions)
    state = finish_all(
        state,
        {
            segment: successors
            for segment, successors in finished.items()
            if record.assignments.get(segment) == reader and segment in state.cursors
        },
    )
    leases = {r: t for r, t in record.leases.items() if t >= now or r == reader}
    if leases.get(reader, 0) - now < lease_ms // 2:
        leases[reader] = now + lease_ms
    assignments = _assignments_kept(record, state, leases)
    held = len(record.holdings.get(reader, ())) if assignments is record.assignments else None
    assignments = rebalance(state, assignments, reader, len(leases), held)
    pending = frozenset(r for r in record.checkpoint_pending if r in leases) - {reader}
    unchanged = (
        state is record.state
        and assignments is record.assignments
        and leases == record.leases
        and pending == record.checkpoint_pending
    )
    if unchanged:
        return record  # an idle sync: nothing per segment is looked at, nothing is copied
    return replace(
        record,
        state=state,
        assignments=assignments,
        leases=leases,
        checkpoint_pending=pending,
    )


def _assignments_kept(
    record: GroupRecord, state: GroupState, leases: Mapping[str, int]
) -> Mapping[str, str]:
    """The record's assignments of readable segments to readers with a lease in ``leases``.

    The record's own when no segment left the readable ones and no lease
    was dropped: every assignment stays (the rules here assign only
    readable segments, and only to readers with a lease).
    """
    if state is record.state and all(r in leases for r in record.leases):
        return record.assignments
    return {s: r for s, r in record.assignments.items() if r in leases and s in state.cursors}


def leave(
    record: GroupRecord, reader: str, positions: Positions, now: int, *, generation: int
) -> GroupRecord:
    """``reader`` reports its positions and leaves: its segments, lease and acknowledgement go.

    A record of another generation (the group was reset) is returned unchanged.
    """
    if record.generation != generation:
        return record
    return replace(
        record,
        state=report(record, reader, positions),
        assignments={s: r for s, r in record.assignments.items() if r != reader},
        leases={r: t for r, t in record.leases.items() if r != reader},
        checkpoint_pending=record.checkpoint_pending - {reader},
    )


# --- the group's rules --------------------------------------------------------------------


def request_checkpoint(record: GroupRecord, name: str, now: int) -> GroupRecord:
    """Starts checkpoint ``name``: every reader with a lease must acknowledge it.

    Raises:
        FailedPreconditionError: another checkpoint is in progress.
    """
    if record.checkpoint is not None:
        msg = f"checkpoint {record.checkpoint!r} is still in progress"
        raise FailedPreconditionError(msg)
    return replace(record, checkpoint=name, checkpoint_pending=frozenset(record.leases))


def complete_checkpoint(record: GroupRecord, name: str, now: int) -> GroupRecord:
    """Records checkpoint ``name`` as the stream cut of the readers' reported positions."""
    return replace(
        record,
        checkpoint=None,
        checkpoint_pending=frozenset(),
        checkpoints={**record.checkpoints, name: stream_cut(record.state)},
    )


def cancel_checkpoint(record: GroupRecord, now: int) -> GroupRecord:
    """Forgets the checkpoint in progress (it timed out)."""
    return replace(record, checkpoint=None, checkpoint_pending=frozenset())


def reset(record: GroupRecord, state: GroupState, now: int) -> GroupRecord:
    """A new generation at ``state``: readers of the old one must be recreated; checkpoints stay."""
    return GroupRecord(record.streams, record.generation + 1, state, checkpoints=record.checkpoints)
