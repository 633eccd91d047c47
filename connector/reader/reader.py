"""The event reader: reads the segments its group gives it and yields events and watermarks."""

from __future__ import annotations

import collections
import logging
import math
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import TYPE_CHECKING, Generic, TypeVar

from connector.client.serializers import Serializer
from connector.errors import InvalidArgumentError
from connector.framing import Frame, iter_frames
from connector.model import ReadResult
from connector.reader.events import EventRead, Position, ReaderConfig, TimeDomain
from connector.reader.group import GroupRecord, ReaderGroupResetError
from connector.reader.group_state import (
    GroupState,
    advance,
    emitted_watermark,
    finish,
    group_watermark,
    unassigned_oldest_first,
    watermark_after,
)
from connector.reader.lineage import successors_of

if TYPE_CHECKING:
    from connector.reader.group import ReaderGroup

__all__ = ["EventReader"]

T = TypeVar("T")
_log = logging.getLogger(__name__)
_MAX_READ_BYTES = 4 * 1024 * 1024


class _SegmentInput:
    """One held segment: what was consumed, what is buffered, the read in flight."""

    def __init__(self, segment: str, offset: int, watermark: int, end: int | None):
        self.segment = segment
        self.consumed_offset = offset
        self.consumed_watermark = watermark
        self.end = end
        self.fetch_offset = offset
        self.buffer_watermark = watermark
        self.frames: collections.deque[Frame] = collections.deque()
        self.end_of_segment = False
        self.successors: tuple[str, ...] = ()
        self.inflight: Future[ReadResult] | None = None

    @property
    def reached_end_cut(self) -> bool:
        return self.end is not None and self.fetch_offset >= self.end

    @property
    def drained(self) -> bool:
        """Read to its end (seal or end cut) and every event consumed."""
        return not self.frames and (self.end_of_segment or self.reached_end_cut)

    def absorb(self, result: ReadResult) -> None:
        if result.data:
            self.frames.extend(iter_frames(result.data, result.offset))
        self.fetch_offset = result.next_offset
        self.buffer_watermark = max(self.buffer_watermark, result.watermark)
        self.end_of_segment = result.end_of_segment
        self.successors = result.successors
        if not self.frames:
            self.consumed_watermark = max(self.consumed_watermark, self.buffer_watermark)

    def take(self) -> Frame:
        frame = self.frames.popleft()
        self.consumed_offset = frame.end
        after = watermark_after(self.buffer_watermark, frame.ingestion_time, not self.frames)
        if after is not None:
            self.consumed_watermark = max(self.consumed_watermark, after)
        return frame


class EventReader(Generic[T]):
    """One member of a reader group; not thread-safe (one thread reads).

    Guarantees, in the ingestion-time domain:

    - watermark reads strictly ascend, through rebalancing, readers joining
      and leaving, and scaling;
    - every event returned after a watermark ``W`` has an ingestion time
      above ``W + max_event_time_lag``;
    - events of one routing key come in the order written, across scaling.

    In the processing-time domain (the default) no watermark read is returned.
    """

    def __init__(
        self,
        group: ReaderGroup,
        reader_id: str,
        serializer: Serializer[T],
        config: ReaderConfig,
        *,
        lease_ms: int = 30_000,
        sync_interval_ms: int = 100,
    ):
        if not reader_id or len(reader_id) > 256:
            msg = f"reader_id must be 1 to 256 characters, got {reader_id!r}"
            raise InvalidArgumentError(msg)
        self.reader_id = reader_id
        self.config = config
        self._group = group
        self._client = group._client
        self._serializer = serializer
        self._lease_ms = lease_ms
        self._sync_interval_s = sync_interval_ms / 1000
        self._inputs: dict[str, _SegmentInput] = {}
        self._rotation: collections.deque[str] = collections.deque()
        self._state = GroupState()
        self._generation = group.record().generation
        self._last_sync = -math.inf
        self._last_emitted: int | None = None
        self._watermarks_seen: dict[str, int] | None = None  # inputs of the last emission check
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"tidemark-{reader_id}")
        self._sync()

    # --- the public API ---------------------------------------------------------

    def read_next_event(self, timeout_ms: int | None = None) -> EventRead[T] | None:
        """The next event or watermark, or None when none came within ``timeout_ms``.

        Blocks up to ``timeout_ms`` (default: the config's read timeout).
        Returns None at once when the group has read everything (a bounded
        group, or sealed streams), after a final END_OF_TIME watermark.
        """
        if self._closed:
            msg = f"reader {self.reader_id!r} is closed"
            raise InvalidArgumentError(msg)
        timeout_s = (self.config.read_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = time.monotonic() + timeout_s
        while True:
            self._absorb_finished_reads()
            if (
                self._has_drained_inputs()
                or time.monotonic() - self._last_sync >= self._sync_interval_s
            ):
                self._sync()
            watermark = self._watermark_to_emit()
            if watermark is not None:
                return EventRead.of_watermark(watermark)
            event = self._next_event()
            if event is not None:
                return event
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._state.is_done:
                return None
            self._start_reads()
            self._wait_for_reads(min(remaining, self._sync_interval_s))

    @property
    def last_watermark(self) -> int | None:
        """The last watermark this reader returned."""
        return self._last_emitted

    @property
    def segments(self) -> list[str]:
        """The segments this reader holds now."""
        return sorted(self._inputs)

    def close(self) -> None:
        """Reports positions, gives its segments back and leaves the group.

        Closing twice is harmless.
        """
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        positions = self._positions()
        me = self.reader_id

        def leave(record: GroupRecord, _now: int) -> GroupRecord:
            if record.generation != self._generation:
                return record
            state = _report(record, me, positions)
            return replace(
                record,
                state=state,
                assignments={s: r for s, r in record.assignments.items() if r != me},
                leases={r: t for r, t in record.leases.items() if r != me},
                checkpoint_pending=record.checkpoint_pending - {me},
            )

        try:
            self._group.update(leave)
        except ReaderGroupResetError:
            pass

    def __enter__(self) -> EventReader[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"EventReader({self.reader_id!r}, group={self._group.name!r}, segments={self.segments})"
        )

    # --- events and watermarks ----------------------------------------------------

    def _next_event(self) -> EventRead[T] | None:
        for _ in range(len(self._rotation)):
            segment = self._rotation[0]
            self._rotation.rotate(-1)
            source = self._inputs[segment]
            if source.frames:
                frame = source.frames[0]
                event = self._serializer.deserialize(frame.payload)
                event_time = self.config.timestamp_assigner.extract_timestamp(
                    event, frame.ingestion_time
                )
                source.take()
                return EventRead.of_event(
                    event,
                    event_time,
                    frame.ingestion_time,
                    Position(segment, frame.offset),
                    frame.routing_key,
                )
        return None

    def _watermark_to_emit(self) -> int | None:
        """The watermark to yield now, from the last synced state and this reader's own positions.

        Recomputed only when a held segment's watermark or the synced state changed.
        """
        if self.config.time_domain is not TimeDomain.INGESTION_TIME:
            return None
        fresher = {s: i.consumed_watermark for s, i in self._inputs.items()}
        if fresher == self._watermarks_seen:
            return None
        self._watermarks_seen = fresher
        watermark = emitted_watermark(
            group_watermark(self._state, fresher), self.config.lag_ms, self._last_emitted
        )
        if watermark is not None:
            self._last_emitted = watermark
        return watermark

    # --- reads ------------------------------------------------------------------

    def _start_reads(self) -> None:
        wait_ms = self.config.read_timeout_ms
        for source in self._inputs.values():
            if source.inflight is not None or source.frames or source.drained:
                continue
            max_bytes = _MAX_READ_BYTES
            if source.end is not None:
                max_bytes = min(max_bytes, source.end - source.fetch_offset)
            source.inflight = self._pool.submit(
                self._client.read,
                source.segment,
                source.fetch_offset,
                max_bytes,
                wait_ms,
                source.buffer_watermark,
            )

    def _wait_for_reads(self, timeout_s: float) -> None:
        pending = [s.inflight for s in self._inputs.values() if s.inflight is not None]
        if pending:
            wait(pending, timeout=timeout_s, return_when=FIRST_COMPLETED)
        else:
            time.sleep(min(timeout_s, 0.01))  # nothing to read: held segments are drained
        self._absorb_finished_reads()

    def _absorb_finished_reads(self) -> None:
        for source in self._inputs.values():
            if source.inflight is not None and source.inflight.done():
                future, source.inflight = source.inflight, None
                source.absorb(future.result())

    def _has_drained_inputs(self) -> bool:
        return any(s.drained for s in self._inputs.values())

    # --- the group ----------------------------------------------------------------

    def _positions(self) -> dict[str, tuple[int, int]]:
        return {s: (i.consumed_offset, i.consumed_watermark) for s, i in self._inputs.items()}

    def _sync(self) -> None:
        """Reports positions and finished segments, renews the lease, rebalances."""
        positions = self._positions()
        finished = {
            s: successors_of(self._client, s, i.successors if i.end_of_segment else ())
            for s, i in self._inputs.items()
            if i.drained
        }
        me = self.reader_id
        generation = self._generation
        lease_ms = self._lease_ms

        def step(record: GroupRecord, now: int) -> GroupRecord:
            if record.generation != generation:
                msg = f"reader group {self._group.name!r} was reset; create a new reader"
                raise ReaderGroupResetError(msg)
            state = _report(record, me, positions)
            assignments = dict(record.assignments)
            for segment, successors in finished.items():
                if assignments.get(segment) == me and segment in state.cursors:
                    state = finish(state, segment, successors)
            leases = {r: t for r, t in record.leases.items() if t >= now or r == me}
            if leases.get(me, 0) - now < lease_ms // 2:  # renew at half-life, not every sync
                leases[me] = now + lease_ms
            assignments = {
                s: r for s, r in assignments.items() if r in leases and s in state.cursors
            }
            assignments = _rebalance(state, assignments, me, len(leases))
            pending = frozenset(r for r in record.checkpoint_pending if r in leases) - {me}
            return replace(
                record,
                state=state,
                assignments=assignments,
                leases=leases,
                checkpoint_pending=pending,
            )

        record = self._group.update(step)
        self._last_sync = time.monotonic()
        self._state = record.state
        self._watermarks_seen = None  # the group may have moved: check again
        held = set(record.segments_of(me))
        for segment in list(self._inputs):
            if segment not in held:
                del self._inputs[segment]  # released: a read in flight is ignored
        for segment in held - set(self._inputs):
            cursor = record.state.cursors[segment]
            self._inputs[segment] = _SegmentInput(
                segment, cursor.offset, cursor.watermark, cursor.end
            )
        self._rotation = collections.deque(sorted(self._inputs))


def _report(record: GroupRecord, me: str, positions: Mapping[str, tuple[int, int]]) -> GroupState:
    """The state with ``me``'s positions of the segments it still holds."""
    state = record.state
    for segment, (offset, watermark) in positions.items():
        if record.assignments.get(segment) == me and segment in state.cursors:
            state = advance(state, segment, offset, watermark)
    return state


def _rebalance(
    state: GroupState, assignments: dict[str, str], me: str, readers: int
) -> dict[str, str]:
    """``me`` takes or gives back segments toward an equal share, oldest watermark first."""
    share = math.ceil(len(state.cursors) / max(readers, 1))
    mine = sorted(
        (s for s, r in assignments.items() if r == me),
        key=lambda s: (state.cursors[s].watermark, s),
    )
    for segment in mine[share:]:
        del assignments[segment]
    for segment in unassigned_oldest_first(state, assignments)[: max(0, share - len(mine))]:
        assignments[segment] = me
    return assignments
