"""A store's settings and what it reports.

:class:`StorageConfig` holds what every storage shares (the ingestion clock,
idle ticks, the event size limit, the segment limit); :class:`StoreConfig`
adds the file store's own (its data dir, descriptors, journal compaction).
:class:`StoreObserver` is what a store reports as it works (metrics).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field

from connector.clock import Clock, SystemClock
from connector.errors import InvalidArgumentError

__all__ = ["StorageConfig", "StoreConfig", "StoreObserver", "default_open_files"]


@dataclass(frozen=True, kw_only=True)
class StorageConfig:
    """What every storage of a store shares.

    Attributes:
        clock: the ingestion clock's source of time.
        max_watermark_lag_ms: a segment idle longer than this gets an idle tick
            (the server's ``--idle-tick-after-ms``).
        polling_period_ms: how often the idle advancer looks; None disables it.
        max_event_size: the largest event accepted, in bytes.
        max_segments: how many segments the store holds at most, sealed ones
            too; a creation or a scale that would pass it fails with
            RESOURCE_EXHAUSTED (cause ``segment_limit``).
        max_segments_per_stream: how many open segments one stream may have:
            a creation with more, or a scale that would leave it more, fails
            with RESOURCE_EXHAUSTED (cause ``stream_segment_limit``). The
            store's costs per open segment are a few hundred bytes of memory
            and an idle tick every ``max_watermark_lag_ms``; a reader's, one
            cursor of its fetch session (see docs/operating.md, "Limits").
        writer_idle_timeout_ms: a writer that asserted event time and then
            neither writes nor asserts for this long is marked idle by the
            store, so it stops holding the event-time watermark back (0:
            never). Looked for every ``polling_period_ms``.
    """

    clock: Clock = field(default_factory=SystemClock)
    max_watermark_lag_ms: int = 10_000
    polling_period_ms: int | None = 1_000
    max_event_size: int = 1024 * 1024
    max_segments: int = 100_000
    max_segments_per_stream: int = 16_384
    writer_idle_timeout_ms: int = 60_000

    def __post_init__(self) -> None:
        if self.max_watermark_lag_ms < 0:
            msg = f"max_watermark_lag_ms must be >= 0, got {self.max_watermark_lag_ms!r}"
            raise InvalidArgumentError(msg)
        if self.polling_period_ms is not None and self.polling_period_ms <= 0:
            msg = f"polling_period_ms must be > 0 or None, got {self.polling_period_ms!r}"
            raise InvalidArgumentError(msg)
        if self.max_event_size <= 0:
            msg = f"max_event_size must be > 0, got {self.max_event_size!r}"
            raise InvalidArgumentError(msg)
        _check_positive(self, "max_segments")
        _check_positive(self, "max_segments_per_stream")
        timeout = self.writer_idle_timeout_ms
        if not isinstance(timeout, int) or timeout < 0:
            msg = f"writer_idle_timeout_ms must be >= 0 (0: never), got {timeout!r}"
            raise InvalidArgumentError(msg)


@dataclass(frozen=True)
class StoreConfig(StorageConfig):
    """How a file store behaves: :class:`StorageConfig` and its data dir.

    Attributes:
        data_dir: where the journal and the segments' data files live.
        max_open_files: how many data-file descriptors stay open at most when
            idle (sealed and cold segments' files are closed, least recently
            used first); None takes a quarter of the process's descriptor
            limit, 16 to 1024.
        compact_after_records: the journal is compacted (rewritten as a
            snapshot of the live state) once it holds this many records (a
            round of ticks counting the segments it ticked) and twice the
            bytes of its last snapshot, so a restart replays the live state
            and at most this many records of history or twice its bytes.
    """

    data_dir: str
    max_open_files: int | None = None
    compact_after_records: int = 20_000

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_open_files is not None:
            _check_positive(self, "max_open_files")
        _check_positive(self, "compact_after_records")


def _check_positive(config: object, name: str) -> None:
    value = getattr(config, name)
    if not isinstance(value, int) or value < 1:
        msg = f"{name} must be an integer >= 1, got {value!r}"
        raise InvalidArgumentError(msg)


class StoreObserver:
    """What a store reports as it works (metrics); every method does nothing by default.

    Called on the thread that makes changes durable: an observer must be
    quick and must not call the store.
    """

    def committed(self, changes: int) -> None:
        """A group of ``changes`` changes was made durable and published."""

    def ticked(self, segments: int) -> None:
        """``segments`` idle segments got an idle tick."""

    def timed_out(self, writers: int) -> None:
        """``writers`` silent writers were marked idle (their event time no longer holds)."""


def default_open_files() -> int:
    """A quarter of the process's soft descriptor limit, 16 to 1024."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(16, min(1024, soft // 4))
