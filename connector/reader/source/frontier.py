"""How far a read has planned: a :class:`Frontier`, the value every host keeps.

The Spark adapter keeps one in each of its offsets, the Flink adapter in its
keyed state. A frontier is a :class:`~connector.groups.state.GroupState`
(where every readable segment is and its watermark, which successors wait
for which predecessors, which segments are finished), the final offsets of
the segments finished while planning, and the last event-time watermark.
Between two frontiers lie whole events (:mod:`connector.reader.source.ranges`).

A host hands its frontiers out in one of their forms (:meth:`Frontier.to_dict`,
:meth:`Frontier.to_json`) and is given them back. Through a
:class:`FrontierForms` it makes each form of a frontier once and reads a
form it made (or read) lately as the same frontier object, comparing the
form (in C, no object per segment) instead of reading it again: a planner
that keeps what it derived from a frontier object then finds it again, and
a host that plans again from the frontier it handed out last costs no look
over the segments when nothing moved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from connector.errors import InvalidArgumentError
from connector.groups.compact import compact_state, read_state
from connector.groups.percentile import NO_RUN, RunCounts
from connector.groups.state import GroupState, least_event_time
from connector.reader.source.timekeeping import rose

__all__ = ["Frontier", "FrontierForms"]


@dataclass(frozen=True)
class Frontier:
    """How far a read has planned: see the module docstring.

    Attributes:
        state: the group state at the frontier.
        ends: the final offset of each segment finished while planning (the
            segments finished before the start are not listed: nothing of
            them is read).
        watermark: the last event-time watermark, or None (none yet, or a
            domain without watermarks). It never steps back from one
            frontier to the next.
        run: the events read up to this frontier and how many of them came
            out late, as the percentile rule counts them
            (:class:`~connector.groups.percentile.RunCounts`; kept below
            percentile 1 only), so a restore goes on with the same allowance.
    """

    state: GroupState
    ends: Mapping[str, int] = field(default_factory=dict)
    watermark: int | None = None
    run: RunCounts = NO_RUN

    def __post_init__(self) -> None:
        object.__setattr__(self, "ends", MappingProxyType(dict(self.ends)))

    def rose_above(self, other: Frontier) -> bool:
        """Whether this frontier's watermark rose above ``other``'s."""
        return rose(self.watermark, other.watermark)

    def reads_as(self, other: Frontier) -> bool:
        """Whether ``other`` reads what this frontier reads: only watermarks differ.

        The same segments readable at the same offsets, the same waiting for
        the same predecessors, the same finished with the same ends: nothing
        lies between the two (an advance over idle segments whose
        watermarks the store's idle ticks moved). Their watermarks, event
        times and run counts may differ.
        """
        mine, theirs = self.state, other.state
        if (
            mine.finished != theirs.finished
            or self.ends != other.ends
            or mine.end_cut != theirs.end_cut
            or mine.bounded_to != theirs.bounded_to
            or mine.cursors.keys() != theirs.cursors.keys()
            or mine.waiting.keys() != theirs.waiting.keys()
        ):
            return False
        cursors = theirs.cursors
        if any(cursors[s].offset != c.offset for s, c in mine.cursors.items()):
            return False
        waiting = theirs.waiting
        return all(waiting[s].waiting_for == w.waiting_for for s, w in mine.waiting.items())

    def contains(self, end: Frontier) -> bool:
        """Whether ``end`` reads nothing beyond this frontier (nothing written after it)."""
        mine = self.state
        if not end.state.finished <= mine.finished:
            return False  # a segment sealed since, read to its seal
        for segment, cursor in end.state.cursors.items():
            limit = mine.cursors.get(segment)
            if limit is None:
                if segment not in mine.finished:
                    return False  # a successor created since
            elif cursor.offset > limit.offset:
                return False
        return True

    def clipped_to(self, target: Frontier, begin: Frontier) -> Frontier:
        """The end of a batch from ``begin``: this frontier, or ``target`` where this passes it.

        ``Trigger.AvailableNow``'s clip: ``target`` is the streams when the
        query started (every open segment's tail then); no batch reads past
        it, and no watermark passes its: a segment that reached its position
        in ``target`` keeps ``target``'s watermark there, though the store
        ticked it since, so once a batch reached the target the next end is
        that batch's end and the query stops. The clipped end is ``target``
        as an end from ``begin``: the segments ``begin`` finished stay
        finished and are not read again, and the watermark never steps back
        below ``begin``'s.
        """
        if target.contains(self):
            return self._held_at(target, begin)
        finished = target.state.finished | begin.state.finished
        cursors = {
            segment: cursor
            for segment, cursor in target.state.cursors.items()
            if segment not in begin.state.finished
        }
        state = replace(target.state, cursors=cursors, finished=finished)
        watermark = target.watermark if rose(target.watermark, begin.watermark) else begin.watermark
        return Frontier(state, {**target.ends, **begin.ends}, watermark, self.run)

    def _held_at(self, target: Frontier, begin: Frontier) -> Frontier:
        """The frontier, with no watermark above ``target``'s where it reached ``target``."""
        cursors = dict(self.state.cursors)
        for segment, cursor in self.state.cursors.items():
            limit = target.state.cursors.get(segment)
            if limit is not None and cursor.offset == limit.offset:
                cursors[segment] = replace(
                    cursor,
                    watermark=min(cursor.watermark, limit.watermark),
                    event_time=least_event_time(cursor.event_time, limit.event_time),
                )
        watermark = self.watermark
        if rose(watermark, target.watermark):
            watermark = (
                target.watermark if rose(target.watermark, begin.watermark) else begin.watermark
            )
        return Frontier(replace(self.state, cursors=cursors), self.ends, watermark, self.run)

    # --- its forms in checkpoints -----------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict of plain values, keys sorted; :meth:`from_dict` reads it back.

        The state is in the compact form (:mod:`connector.groups.compact`: a
        column per field, about 12 bytes a segment at thousands of idle
        segments, where ``GroupState.to_dict``'s form took about 60): the form
        in a Spark checkpoint's offsets and a Flink savepoint. Earlier releases
        wrote ``to_dict``'s form, which :meth:`from_dict` still reads; a
        checkpoint this release wrote needs this release or a later one.
        """
        data = {"state": compact_state(self.state), "ends": dict(self.ends)}
        data["watermark"] = self.watermark
        if self.run != NO_RUN:  # written only below percentile 1: older readers read the rest
            data["run"] = {"read": self.run.read, "late": self.run.late}
        return _sorted(data)

    def to_json(self) -> str:
        """The compact JSON form of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], previous: GroupState | None = None) -> Frontier:
        """Reads :meth:`to_dict`'s output, and the older forms (a nested state, JSON strings).

        Cursors equal to ``previous``'s are ``previous``'s objects (reading a
        frontier that moved a few of thousands of segments makes objects for
        those few).

        Raises:
            InvalidArgumentError: naming the value when it is not a frontier.
        """
        try:
            state = data["state"]
            ends = data["ends"]
            watermark = data["watermark"]
            if isinstance(state, str):  # the older form: JSON inside strings, -1 for no watermark
                state = json.loads(state)
                ends = json.loads(ends)
                watermark = None if int(watermark) < 0 else int(watermark)
            run = data.get("run")
            return cls(
                read_state(state, previous),
                {str(s): int(o) for s, o in ends.items()},
                None if watermark is None else int(watermark),
                NO_RUN if run is None else RunCounts(int(run["read"]), int(run["late"])),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            msg = f"invalid frontier {dict(data)!r:.200}: {error!r}"
            raise InvalidArgumentError(msg) from None

    @classmethod
    def from_json(cls, text: str) -> Frontier:
        """Reads :meth:`to_json`'s output."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            msg = f"invalid frontier JSON {text!r:.200}: {error}"
            raise InvalidArgumentError(msg) from None
        if not isinstance(data, Mapping):
            msg = f"invalid frontier JSON {text!r:.200}: not an object"
            raise InvalidArgumentError(msg)
        return cls.from_dict(data)


def _sorted(value: Any) -> Any:
    """``value`` with the keys of its mappings sorted (the lists of a state hold no mapping)."""
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    return value


#: The keys of :meth:`Frontier.to_dict`: what of a host's value is the frontier.
_PARTS = ("ends", "state", "watermark")


class FrontierForms:
    """The forms of the last ``size`` frontiers a host made or read, each made or read once.

    :meth:`as_dict` and :meth:`as_json` make a frontier object's form once;
    :meth:`from_dict` and :meth:`from_json` answer a form equal to one
    remembered with its frontier object, without reading it (a dict is
    compared on the frontier's keys only: a host's value may hold more).
    Any other form is read as :meth:`Frontier.from_dict` and
    :meth:`Frontier.from_json` read it, older forms included. Not thread-safe.
    """

    def __init__(self, size: int = 8):
        self._size = size
        self._known: list[_Forms] = []  # the last used last

    def as_dict(self, frontier: Frontier) -> dict[str, Any]:
        """``frontier.to_dict()``, made once per frontier object (do not change it)."""
        forms = self._of(frontier)
        if forms.data is None:
            forms.data = frontier.to_dict()
        return forms.data

    def as_json(self, frontier: Frontier) -> str:
        """``frontier.to_json()``, made once per frontier object."""
        forms = self._of(frontier)
        if forms.text is None:
            forms.text = frontier.to_json()
        return forms.text

    def from_dict(self, data: Mapping[str, Any]) -> Frontier:
        """``Frontier.from_dict(data)``: the remembered object when its dict has these parts.

        Raises:
            InvalidArgumentError: as :meth:`Frontier.from_dict`.
        """
        for forms in reversed(self._known):
            known = forms.data
            if known is not None and all(data.get(k, self) == known[k] for k in _PARTS):
                return self._used(forms).frontier
        previous = self._known[-1].frontier.state if self._known else None
        frontier = Frontier.from_dict(data, previous)
        parts = {k: data[k] for k in _PARTS} if isinstance(data.get("state"), Mapping) else None
        return self._add(_Forms(frontier, parts)).frontier

    def from_json(self, text: str) -> Frontier:
        """``Frontier.from_json(text)``: the remembered object for a text seen lately.

        Raises:
            InvalidArgumentError: as :meth:`Frontier.from_json`.
        """
        for forms in reversed(self._known):
            if forms.text == text:
                return self._used(forms).frontier
        return self._add(_Forms(Frontier.from_json(text), text=text)).frontier

    def _of(self, frontier: Frontier) -> _Forms:
        for forms in self._known:
            if forms.frontier is frontier:
                return self._used(forms)
        return self._add(_Forms(frontier))

    def _used(self, forms: _Forms) -> _Forms:
        self._known.remove(forms)
        self._known.append(forms)
        return forms

    def _add(self, forms: _Forms) -> _Forms:
        self._known.append(forms)
        del self._known[: -self._size]
        return forms


@dataclass(eq=False)
class _Forms:
    """A frontier and the forms of it made or read (None: not yet)."""

    frontier: Frontier
    data: dict[str, Any] | None = None
    text: str | None = None
