"""A group state's compact form: one list of segment names, then a column per field.

:meth:`GroupState.to_dict <connector.groups.state.GroupState.to_dict>` keeps
each readable segment as ``name: [offset, watermark, end, event_time]``:
about 73 bytes a segment, and an object per segment to make and to read.
The compact form (:func:`compact_state`) keeps the readable segments' names
once, sorted and grouped by what precedes their last ``/`` (a segment of a
stream is ``scope/stream/number``), and their fields as parallel lists of
plain integers:

- ``segments``: ``[[prefix, [tail, ...]], ...]``, a name being ``prefix +
  str(tail)``; a tail is an integer when it is one written plainly;
- ``offsets``: the offsets reached;
- ``base`` and ``watermarks``: each watermark less ``base`` (the least of
  them), so the watermarks of segments ticked within seconds of each other
  take a few digits each;
- ``event_times``: each writers' event time less ``base``; null while not
  known, ``"-"`` for :data:`~connector.groups.state.NO_WRITER`;
- ``ends``: the end cuts, null for none.

A column whose segments all hold one value is stored as ``{"all": value}``
(the offsets and event times of an idle group, the ends of an unbounded one).

Waiting and finished segments, the end cut and ``bounded_to`` keep the
form of ``to_dict`` (a group seldom has many waiting segments). About a
fifth of the bytes of ``to_dict``'s form at thousands of idle segments.

Costs: a state keeps its columns once made (:func:`columns_of`), so a state
written twice, or read and written again, is laid out once; and
:func:`read_state` given the ``previous`` state (the one the caller held)
compares whole columns with its columns, builds a cursor only for the
segments that changed and keeps ``previous``'s cursor objects for the
others: reading a record after another reader moved some of its segments
costs a few list comparisons plus what moved, not an object per segment,
and a reader that follows the group compares what it holds by identity.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from connector.groups.state import NO_WRITER, GroupState, SegmentCursor

__all__ = [
    "Columns",
    "columns_of",
    "compact_state",
    "is_compact",
    "joined_names",
    "read_state",
    "split_names",
]

#: ``event_times``' mark for a segment no writer holds.
_NO_WRITER_MARK = "-"

#: A column stored as ``{"all": value}``: every segment has ``value``.
_ALL = "all"

#: The attribute a state keeps its columns under (a memo, as ``functools.cached_property``'s).
_MEMO = "_compact_columns"


class Columns:
    """A state's readable segments, sorted by name, and their fields in parallel lists.

    Made once per state (:func:`columns_of`); do not change them.
    """

    __slots__ = ("cursors", "ends", "event_times", "names", "offsets", "watermarks")

    def __init__(
        self,
        names: tuple[str, ...],
        cursors: list[SegmentCursor],
        offsets: list[int],
        watermarks: list[int],
        ends: list[int | None],
        event_times: list[int | None],
    ):
        self.names = names
        self.cursors = cursors
        self.offsets = offsets
        self.watermarks = watermarks
        self.ends = ends
        self.event_times = event_times


def columns_of(state: GroupState) -> Columns:
    """``state``'s readable segments in columns, made once per state object."""
    known = state.__dict__.get(_MEMO)
    if known is not None:
        return known
    names = tuple(sorted(state.cursors))
    cursors = list(map(state.cursors.__getitem__, names))
    columns = Columns(
        names,
        cursors,
        [c.offset for c in cursors],
        [c.watermark for c in cursors],
        [c.end for c in cursors],
        [c.event_time for c in cursors],
    )
    object.__setattr__(state, _MEMO, columns)
    return columns


def split_names(names: Iterable[str]) -> list[list[Any]]:
    """``names`` as ``[[prefix, [tail, ...]], ...]``, in their order (see the module docstring)."""
    groups: list[list[Any]] = []
    last: str | None = None
    tails: list[Any] = []
    for name in names:
        cut = name.rfind("/") + 1
        prefix, tail = name[:cut], name[cut:]
        if prefix != last:
            tails = []
            groups.append([prefix, tails])
            last = prefix
        plain = tail.isascii() and tail.isdigit() and (tail == "0" or tail[0] != "0")
        tails.append(int(tail) if plain else tail)
    return groups


@functools.lru_cache(maxsize=8)
def _split_once(names: tuple[str, ...]) -> list[list[Any]]:
    """:func:`split_names`, remembered for the last few sets of names (they seldom change)."""
    return split_names(names)


def joined_names(groups: Sequence[Sequence[Any]]) -> list[str]:
    """The names :func:`split_names` split, in their order."""
    return [f"{prefix}{tail}" for prefix, tails in groups for tail in tails]


def compact_state(state: GroupState) -> dict[str, Any]:
    """``state`` in the compact form (JSON-compatible); :func:`read_state` reads it back.

    Equal states give equal forms.
    """
    columns = columns_of(state)
    base = min(columns.watermarks, default=0)
    event_times = columns.event_times
    laid_out: dict[str, Any] = {
        "segments": _split_once(columns.names),
        "offsets": _column(list(columns.offsets)),
        "base": base,
        "watermarks": _column([w - base for w in columns.watermarks]),
        "ends": _column(list(columns.ends)),
    }
    if _constant(event_times):
        laid_out["event_times"] = {_ALL: _event_time_mark(event_times[0], base)}
    else:
        laid_out["event_times"] = [_event_time_mark(e, base) for e in event_times]
    return {"columns": laid_out, **state.to_dict(with_cursors=False)}


def _constant(values: list[Any]) -> bool:
    """Whether ``values`` are one value repeated (and there is one)."""
    return bool(values) and values.count(values[0]) == len(values)


def _column(values: list[Any]) -> list[Any] | dict[str, Any]:
    """A column as stored: its values, or ``{"all": value}`` when every segment has ``value``."""
    return {_ALL: values[0]} if _constant(values) else values


def _values(column: list[Any] | Mapping[str, Any], count: int) -> list[Any]:
    """The ``count`` values of a stored column (see :func:`_column`)."""
    if isinstance(column, Mapping):
        return [column[_ALL]] * count
    if len(column) != count:
        msg = f"a column of {len(column)} values for {count} segments"
        raise ValueError(msg)
    return list(column)


def _event_time_mark(event_time: int | None, base: int) -> int | str | None:
    if event_time is None:
        return None
    return _NO_WRITER_MARK if event_time == NO_WRITER else event_time - base


def _event_time_of(mark: Any, base: int) -> int | None:
    if mark is None:
        return None
    if mark == _NO_WRITER_MARK:
        return NO_WRITER
    if type(mark) is not int:
        msg = f"an event time is an integer, null or {_NO_WRITER_MARK!r}, got {mark!r}"
        raise TypeError(msg)
    return mark + base


def is_compact(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` is a state in the compact form (else ``to_dict``'s)."""
    return "columns" in data


def read_state(data: Mapping[str, Any], previous: GroupState | None = None) -> GroupState:
    """The state of ``data``, in the compact form or ``to_dict``'s (of any release).

    Cursors equal to ``previous``'s are ``previous``'s objects.

    Raises:
        KeyError, TypeError, ValueError: ``data`` is not a state (the caller names it).
    """
    if not is_compact(data):
        state = GroupState.from_dict(data)
        return state if previous is None else _reusing(state, previous)
    laid_out = data["columns"]
    before = None if previous is None else columns_of(previous)
    names = _names(laid_out["segments"], before)
    count, base = len(names), laid_out["base"]
    stored = laid_out["event_times"]
    if isinstance(stored, Mapping):
        event_times = [_event_time_of(stored[_ALL], base)] * count
    else:
        event_times = [_event_time_of(m, base) for m in _values(stored, count)]
    fields = (
        _values(laid_out["offsets"], count),
        [w + base for w in _values(laid_out["watermarks"], count)],
        _values(laid_out["ends"], count),
        event_times,
    )
    cursors = _cursors(names, fields, before)
    state = GroupState.from_dict(data, dict(zip(names, cursors, strict=True)))
    object.__setattr__(state, _MEMO, Columns(names, cursors, *fields))
    return state


def _names(groups: list[list[Any]], previous: Columns | None) -> tuple[str, ...]:
    """The names of ``groups``: ``previous``'s tuple when they are the same (compared in C)."""
    if previous is not None and groups == _split_once(previous.names):
        return previous.names
    return tuple(joined_names(groups))


def _cursors(
    names: tuple[str, ...], now: tuple[list[Any], ...], previous: Columns | None
) -> list[SegmentCursor]:
    """The cursors of ``names`` with fields ``now``: ``previous``'s objects where unchanged."""
    if previous is None:
        return list(map(SegmentCursor, *now))
    if previous.names != names:
        known = dict(zip(previous.names, previous.cursors, strict=True))
        rows = zip(*now, strict=True)
        return [_kept(known.get(name), row) for name, row in zip(names, rows, strict=True)]
    cursors = list(previous.cursors)
    then = (previous.offsets, previous.watermarks, previous.ends, previous.event_times)
    changed: set[int] = set()
    for column, before in zip(now, then, strict=True):
        if column != before:  # compared in C, and so are the places where they differ
            changed.update(itertools.compress(range(len(column)), map(operator.ne, column, before)))
    offsets, watermarks, ends, event_times = now
    for at in changed:
        cursors[at] = SegmentCursor(offsets[at], watermarks[at], ends[at], event_times[at])
    return cursors


def _kept(
    cursor: SegmentCursor | None, row: tuple[int, int, int | None, int | None]
) -> SegmentCursor:
    """``cursor`` when it holds ``row`` (offset, watermark, end, event time), else a new one."""
    if (
        cursor is not None
        and (cursor.offset, cursor.watermark, cursor.end, cursor.event_time) == row
    ):
        return cursor
    return SegmentCursor(*row)


def _reusing(state: GroupState, previous: GroupState) -> GroupState:
    """``state`` with ``previous``'s cursor objects where they are equal."""
    known = previous.cursors
    cursors = {
        name: known[name] if known.get(name) == cursor else cursor
        for name, cursor in state.cursors.items()
    }
    return GroupState(cursors, state.waiting, state.finished, state.end_cut, state.bounded_to)
