"""A writer's events per segment: queued batches, and their numbers.

Per segment, a writer's events are numbered from ``numbers_from`` on, in
the order written; an append carries the number of its first event, so the
store skips what it has already (a retry, or a replay of the writer id).
A batch whose send failed keeps its numbers and goes again; a batch given
up on (:meth:`SegmentBatches.discard_pending`) leaves a gap that the
segment's next append announces (``discarded_from``), or that an
assertion sent alone fences (:meth:`SegmentBatches.fences`), so no late
copy of it can be stored after either. No method does I/O.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator

from connector.errors import DuplicateEventNumbersError, InvalidArgumentError
from connector.model import AppendResult, Fence

__all__ = ["Batch", "SegmentBatches"]


class Batch:
    """A segment's queued events; ``sent`` of them went out in a call whose fate is unknown."""

    __slots__ = ("events", "keys", "positions", "sent", "size")

    def __init__(self) -> None:
        self.events: list[bytes] = []
        self.positions: list[float] = []
        self.keys: list[str] = []
        self.size = 0
        self.sent = 0

    def add(self, data: bytes, position: float, key: str) -> None:
        """Queues an event at routing position ``position`` with routing key ``key``."""
        self.events.append(data)
        self.positions.append(position)
        self.keys.append(key)
        self.size += len(data)

    def queued(self) -> Iterator[tuple[bytes, float, str]]:
        """Each event with its routing position and key, in order."""
        return zip(self.events, self.positions, self.keys, strict=True)

    @property
    def routing_keys(self) -> list[str] | None:
        """The events' routing keys, or None when none has one."""
        return self.keys if any(self.keys) else None


class SegmentBatches:
    """One writer's queued batches, by segment, in the order they were started; see the module.

    A batch is full at ``max_bytes`` or ``max_events``. ``writer_id`` names
    the writer in errors.

    Raises:
        InvalidArgumentError: ``numbers_from`` is not an integer >= 0.
    """

    def __init__(self, writer_id: str, numbers_from: int, max_bytes: int, max_events: int):
        if isinstance(numbers_from, bool) or not isinstance(numbers_from, int) or numbers_from < 0:
            msg = f"numbers_from must be an integer >= 0, got {numbers_from!r}"
            raise InvalidArgumentError(msg)
        self._writer_id = writer_id
        self._numbers_from = numbers_from
        self._limits = (max_bytes, max_events)
        self._queued: dict[str, Batch] = {}
        self._next_number: dict[str, int] = {}
        # Per segment: the first number of events discarded without knowing whether they
        # were stored, until an append announcing the gap (or a fence) is stored.
        self._discarded_from: dict[str, int] = {}
        # Segments where an answer placed this writer's sequence (events appended): from
        # then on, only events sent before may come back as duplicates.
        self._placed: set[str] = set()
        self._stored_times: dict[str, int] = {}

    # --- the queue -------------------------------------------------------------------

    def add(self, segment: str, data: bytes, position: float, key: str) -> bool:
        """Queues an event for ``segment``; returns whether its batch is full now."""
        batch = self._queued.get(segment)
        if batch is None:
            batch = self._queued[segment] = Batch()
        batch.add(data, position, key)
        max_bytes, max_events = self._limits
        return batch.size >= max_bytes or len(batch.events) >= max_events

    def next_segment(self) -> str | None:
        """The segment whose batch has waited longest (None: nothing is queued)."""
        return next(iter(self._queued), None)

    def take(self, segment: str) -> Batch:
        """Takes ``segment``'s batch out of the queue, to send it."""
        return self._queued.pop(segment)

    def keep(self, segment: str, batch: Batch) -> None:
        """Queues a batch whose send failed again, last: it goes again with the same numbers.

        Its events went out in a call whose fate is unknown (an earlier try
        may still be on its way), so duplicates of them are this writer's own.
        """
        batch.sent = len(batch.events)
        self._queued[segment] = batch

    def take_stranded(self, open_segments: Container[str]) -> list[Batch]:
        """Takes out the batches of every segment not in ``open_segments`` (sealed by scaling)."""
        return [self._queued.pop(s) for s in list(self._queued) if s not in open_segments]

    @property
    def pending_events(self) -> int:
        """How many events are queued."""
        return sum(len(batch.events) for batch in self._queued.values())

    def discard_pending(self) -> int:
        """Drops every queued event; returns how many. A batch sent before leaves a gap."""
        dropped = self.pending_events
        for segment, batch in self._queued.items():
            if batch.sent:
                first = self.first_number(segment)
                announced = self.announced(segment)
                self._discarded_from[segment] = first if announced is None else announced
                self._next_number[segment] = first + len(batch.events)
        self._queued.clear()
        return dropped

    # --- numbers -----------------------------------------------------------------

    def first_number(self, segment: str) -> int:
        """The number of this writer's next event in ``segment``."""
        return self._next_number.get(segment, self._numbers_from)

    def announced(self, segment: str) -> int | None:
        """The gap the next append to ``segment`` announces (``discarded_from``), if any."""
        gap = self._discarded_from.get(segment)
        if gap is None and self._numbers_from and segment not in self._next_number:
            return 0  # a new incarnation: the numbers below numbers_from are not this writer's
        return gap

    def may_carry_assertion(self, segment: str) -> bool:
        """Whether an assertion may ride on the append of ``segment``'s batch, just taken.

        Only on a flush's last append, and only when no other segment has a
        gap to fence (:meth:`gaps_only_in`).
        """
        return not self._queued and self.gaps_only_in(segment)

    def gaps_only_in(self, segment: str) -> bool:
        """Whether no segment but ``segment`` has a gap to fence.

        Only then may an assertion ride on ``segment``'s append: one sent
        alone carries the fences, and this append's own gap announcement
        fences its segment first, so no late copy of a discarded batch can
        be stored after the assertion.
        """
        return all(s == segment for s in self._discarded_from)

    def fences(self) -> dict[str, Fence]:
        """The gaps an assertion sent alone fences, by segment."""
        return {
            segment: Fence(discarded_from, self.first_number(segment))
            for segment, discarded_from in self._discarded_from.items()
        }

    def fenced(self, segments: Iterable[str]) -> None:
        """Notes that a stored assertion fenced the gaps of ``segments``."""
        for segment in segments:
            self._discarded_from.pop(segment, None)

    def stored(
        self, segment: str, first: int, batch: Batch, result: AppendResult
    ) -> DuplicateEventNumbersError | None:
        """Notes the store's answer to the append of ``batch`` (numbered from ``first``).

        Returns the error to raise when the store skipped events of the batch
        as duplicates that no earlier send can explain (another writer has
        this writer's id); they are not stored. Duplicates are explained by a
        send of this batch whose answer was lost (an earlier flush, or the
        client's own resend), and, until an append of this writer to
        ``segment`` was stored, by a replay of the writer id's sequence.
        """
        self._next_number[segment] = first + len(batch.events)
        self._discarded_from.pop(segment, None)
        placed = segment in self._placed
        if result.appended:
            self._stored_times[segment] = result.ingestion_time
            self._placed.add(segment)
        explained = len(batch.events) if result.resent or not placed else batch.sent
        if result.duplicates <= explained:
            return None
        lost = slice(explained, result.duplicates)
        numbers = f"{first + explained} to {first + result.duplicates - 1}"
        msg = (
            f"the store skipped {result.duplicates - explained} event(s) to {segment!r} "
            f"(numbers {numbers} of writer {self._writer_id!r}) as duplicates, but this writer "
            "never sent them before: another writer is using its id; they are not stored"
        )
        return DuplicateEventNumbersError(
            msg,
            segment,
            self._writer_id,
            first + explained,
            tuple(batch.events[lost]),
            tuple(batch.keys[lost]),
        )

    def stored_times(self) -> dict[str, int]:
        """The ingestion time of the last batch stored in each segment since the last call."""
        stored, self._stored_times = self._stored_times, {}
        return stored
