"""Checks of a store request's arguments, made once, by the store's front (:mod:`.front`).

Each check raises the domain error a client gets (naming the bad value and
the argument) before an engine does any work, so a malformed request is
refused with the same status and message whatever holds the data. Checks
against the store's state (is it sealed, does an event number leave a gap)
are the front's decisions on the engine's pending state;
:func:`duplicates_in_batch` is the one rule of writer ids and event numbers
(an append's, and an assertion's fences).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from connector._wire import MAX_EVENTS_PER_APPEND
from connector.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    ResourceExhaustedError,
    quoted,
)
from connector.framing import MAX_ROUTING_KEY_BYTES
from connector.model import Assertion, Fence
from connector.names import state_key_scope, validate_name

__all__ = [
    "MAX_STATE_KEY",
    "check_append",
    "check_assertion",
    "check_cut",
    "check_joining",
    "check_max_bytes",
    "check_open_segments",
    "check_plan_limits",
    "check_scope_empty",
    "check_segment_count",
    "check_state_key",
    "check_state_prefix",
    "duplicates_in_batch",
]

#: The longest state key, in characters.
MAX_STATE_KEY = 512


def check_segment_count(segment_count: int, most: int) -> None:
    """Refuses a stream creation's segment count below 1, or above ``most`` (the stream limit).

    Raises:
        InvalidArgumentError: below 1, or not an integer.
        ResourceExhaustedError: above ``most`` (cause ``stream_segment_limit``).
    """
    if not isinstance(segment_count, int) or segment_count < 1:
        msg = f"segment_count must be 1 to {most}, got {segment_count!r}"
        raise InvalidArgumentError(msg)
    if segment_count > most:
        msg = f"segment_count {segment_count} is over {_stream_limit(most)}"
        raise ResourceExhaustedError(msg, cause="stream_segment_limit")


def check_open_segments(stream: str, open_after: int, most: int) -> None:
    """Refuses a change that would leave ``stream`` more than ``most`` open segments.

    Raises:
        ResourceExhaustedError: naming the count and the limit (cause
            ``stream_segment_limit``).
    """
    if open_after > most:
        msg = f"stream {stream} would have {open_after} open segments, over {_stream_limit(most)}"
        raise ResourceExhaustedError(msg, cause="stream_segment_limit")


def _stream_limit(most: int) -> str:
    return (
        f"the limit of {most} open segments per stream "
        "(max_segments_per_stream; tidemark-server --max-segments-per-stream)"
    )


def check_append(
    segment: str,
    writer_id: str,
    first_event_number: int,
    events: Sequence[bytes],
    routing_keys: Sequence[str] | None,
    max_event_size: int,
    discarded_from: int | None = None,
) -> None:
    """Refuses a malformed append: its writer id, numbers, batch, keys or event sizes.

    Raises:
        InvalidArgumentError: a bad writer id, number, empty batch or key.
        ResourceExhaustedError: too many events, or an event over ``max_event_size``.
    """
    _check_writer_id(writer_id)
    _check_numbers("first_event_number", first_event_number, discarded_from)
    if not events:
        msg = f"an append to {segment!r} needs at least one event"
        raise InvalidArgumentError(msg)
    if len(events) > MAX_EVENTS_PER_APPEND:
        msg = (
            f"an append to {segment!r} has {len(events)} events, over the limit of "
            f"{MAX_EVENTS_PER_APPEND} per append: send smaller batches"
        )
        raise ResourceExhaustedError(msg, cause="batch_too_large")
    if routing_keys and len(routing_keys) != len(events):
        msg = (
            f"an append to {segment!r} has {len(routing_keys)} routing keys for "
            f"{len(events)} events: give none or one per event"
        )
        raise InvalidArgumentError(msg)
    for key in routing_keys or ():
        if len(key.encode()) > MAX_ROUTING_KEY_BYTES:
            msg = f"routing key {key[:40]!r}... is over {MAX_ROUTING_KEY_BYTES} bytes"
            raise InvalidArgumentError(msg)
    for position, event in enumerate(events):
        if len(event) > max_event_size:
            msg = (
                f"event {position} of the batch to {segment!r} has {len(event)} bytes, "
                f"over the limit of {max_event_size}"
            )
            raise ResourceExhaustedError(msg, cause="event_too_large")


def check_assertion(
    scope: str,
    stream: str,
    writer_id: str,
    number: int,
    event_time: int | None,
    fences: Mapping[str, Fence],
) -> None:
    """Refuses a malformed assertion: its stream's name, writer id, number, event time or fences.

    ``fences`` maps a segment name to the numbers the writer gave up on there.

    Raises:
        InvalidArgumentError: naming the bad value and the argument.
    """
    validate_name("scope", scope)
    validate_name("stream", stream)
    _check_writer_id(writer_id)
    if not isinstance(number, int) or number < 0:
        msg = f"assertion number must be >= 0, got {number!r}"
        raise InvalidArgumentError(msg)
    if event_time is not None and (not isinstance(event_time, int) or event_time < 0):
        msg = f"event_time must be epoch milliseconds >= 0, got {event_time!r}"
        raise InvalidArgumentError(msg)
    for segment, fence in fences.items():
        name = f"next_event_number of fence {segment!r}"
        _check_numbers(name, fence.next_event_number, fence.discarded_from)


def check_joining(joining: Assertion, after: Assertion | None) -> None:
    """Refuses a joining assertion (before an append's events) that is no time, or not first.

    ``after`` is the assertion riding after the same events, if any: it
    must be numbered after ``joining`` and not fall below it.

    Raises:
        InvalidArgumentError: naming the values.
    """
    if joining.event_time is None:
        msg = f"a joining assertion asserts an event time; number {joining.number} is an idle mark"
        raise InvalidArgumentError(msg)
    if after is None:
        return
    if after.number <= joining.number:
        msg = (
            f"the assertion after the events (number {after.number}) must be numbered after "
            f"the joining one before them (number {joining.number})"
        )
        raise InvalidArgumentError(msg)
    if after.event_time is not None and after.event_time < joining.event_time:
        msg = (
            f"the assertion after the events ({after.event_time}) would step back below "
            f"the joining one before them ({joining.event_time})"
        )
        raise InvalidArgumentError(msg)


def _check_writer_id(writer_id: str) -> None:
    if not writer_id or len(writer_id) > 256:
        msg = f"writer_id must be 1 to 256 characters, got {quoted(writer_id)}"
        raise InvalidArgumentError(msg)


def _check_numbers(name: str, first: int, discarded_from: int | None) -> None:
    """Refuses a negative event number, or a ``discarded_from`` outside 0 to it."""
    if first < 0:
        msg = f"{name} must be >= 0, got {first!r}"
        raise InvalidArgumentError(msg)
    if discarded_from is not None and not 0 <= discarded_from <= first:
        msg = f"discarded_from must be 0 to {name} ({first}), got {discarded_from!r}"
        raise InvalidArgumentError(msg)


def duplicates_in_batch(
    segment: str,
    writer_id: str,
    expected: int,
    first: int,
    count: int,
    discarded_from: int | None = None,
) -> int:
    """How many of a batch's ``count`` events, numbered from ``first``, the segment has already.

    ``expected`` is the number of the writer's next event in the segment:
    events numbered below it are stored already (a retry), so they are
    skipped and counted as duplicates. ``discarded_from`` announces that the
    writer discarded the numbers from there up to ``first`` without learning
    whether they were stored: the gap is accepted when every number below
    ``discarded_from`` is stored.

    Raises:
        FailedPreconditionError: ``first`` is past ``expected`` (events would
            be missing) and no announced discard covers the gap.
    """
    if first > expected and (discarded_from is None or expected < discarded_from):
        announced = "" if discarded_from is None else f" (discarded from {discarded_from})"
        msg = (
            f"writer {writer_id!r} sent event number {first}{announced} to "
            f"{segment!r}, but the next one expected is {expected}"
        )
        raise FailedPreconditionError(msg)
    return min(max(expected - first, 0), count)


def check_scope_empty(scope: str, streams: Sequence[str], state_keys: Iterable[str]) -> None:
    """Refuses to delete ``scope`` while it has ``streams`` or state values among ``state_keys``.

    Raises:
        FailedPreconditionError: naming the first five it holds.
    """
    states = [k for k in state_keys if state_key_scope(k) == scope]
    if streams or states:
        held = [f"stream {scope}/{s}" for s in streams] + [f"state {k}" for k in states]
        more = f" and {len(held) - 5} more" if len(held) > 5 else ""
        shown = ", ".join(held[:5]) + more
        msg = f"scope {scope!r} is not empty: delete its {shown} first"
        raise FailedPreconditionError(msg)


def check_max_bytes(max_bytes: int) -> None:
    """Refuses a read's byte budget that is not positive."""
    if max_bytes <= 0:
        msg = f"max_bytes must be > 0, got {max_bytes!r}"
        raise InvalidArgumentError(msg)


def check_plan_limits(
    max_events: int | None, max_bytes: int | None, before_time: int | None = None
) -> None:
    """Refuses a read plan's limit that is given and not positive, or a negative time."""
    for name, limit in (("max_events", max_events), ("max_bytes", max_bytes)):
        if limit is not None and limit <= 0:
            msg = f"{name} must be > 0 or None, got {limit!r}"
            raise InvalidArgumentError(msg)
    if before_time is not None and before_time < 0:
        msg = f"before_time must be epoch milliseconds >= 0 or None, got {before_time!r}"
        raise InvalidArgumentError(msg)


def check_cut(scope: str, stream: str, cut: Mapping[int, int]) -> None:
    """Refuses a truncation of a badly named stream or at an empty cut."""
    validate_name("scope", scope)
    validate_name("stream", stream)
    if not cut:
        msg = f"a truncation of {scope}/{stream} needs a cut naming at least one segment"
        raise InvalidArgumentError(msg)


def check_state_key(key: str) -> None:
    """Refuses a state key that is not 1 to 512 characters."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_STATE_KEY:
        msg = f"state key must be 1 to {MAX_STATE_KEY} characters, got {quoted(key)}"
        raise InvalidArgumentError(msg)


def check_state_prefix(prefix: str) -> None:
    """Refuses a state key prefix longer than a key may be."""
    if len(prefix) > MAX_STATE_KEY:
        limit = MAX_STATE_KEY
        msg = f"a state key prefix must be at most {limit} characters, got {quoted(prefix)}"
        raise InvalidArgumentError(msg)
