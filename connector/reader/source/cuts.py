"""Stream cuts: where a read starts and where a bounded read ends, and what they resolve to.

One :class:`StreamCut` names both ends of a read (the Pravega connector's
``StreamCut``, PyFlink's ``OffsetsInitializer``): the streams' first
readable data, their tails, or explicit offsets. :func:`start_state`
resolves a start cut against the store into the group state a read begins
with.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from connector.client.connection import StoreClient
from connector.errors import InvalidArgumentError
from connector.model import SegmentDescription, StreamDescription, initial_watermark
from connector.names import SegmentId, StreamId
from connector.reader.group_state import GroupState, Successor, advance, finish
from connector.reader.lineage import ancestors, describe_streams

__all__ = ["StreamCut", "by_name", "start_state"]


@dataclass(frozen=True)
class StreamCut:
    """A position in streams: their first readable data, their tails, or explicit offsets.

    Build one with :meth:`earliest`, :meth:`latest` or :meth:`offsets` (the
    style of PyFlink's ``KafkaOffsetsInitializer``); :meth:`of` also takes
    the words ``"earliest"``/``"head"``, ``"latest"``/``"tail"`` and a cut
    mapping. The same cut serves as a read's start and as a bounded read's
    end. ``kind`` is ``"earliest"``, ``"latest"`` or ``"offsets"``; for
    ``"offsets"``, ``cut`` holds ``(segment, byte offset)`` pairs sorted by
    segment name.
    """

    kind: Literal["earliest", "latest", "offsets"]
    cut: tuple[tuple[str, int], ...] = ()

    @classmethod
    def earliest(cls) -> StreamCut:
        """Each segment's first readable offset: everything not truncated away."""
        return cls("earliest")

    @classmethod
    def latest(cls) -> StreamCut:
        """The open segments at their tails, taken when the read is planned."""
        return cls("latest")

    @classmethod
    def offsets(cls, cut: Mapping[str, int]) -> StreamCut:
        """An explicit stream cut, ``{"scope/stream/N": byte offset}`` (a checkpoint's cut).

        Raises:
            InvalidArgumentError: the cut is empty, names a malformed segment
                or has an offset that is not an integer >= 0.
        """
        if not isinstance(cut, Mapping) or not cut:
            msg = f"a stream cut must be a non-empty mapping of segment to offset, got {cut!r}"
            raise InvalidArgumentError(msg)
        pairs = []
        for segment, offset in cut.items():
            SegmentId.parse(segment)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                msg = f"offset of segment {segment!r} must be an integer >= 0, got {offset!r}"
                raise InvalidArgumentError(msg)
            pairs.append((segment, offset))
        return cls("offsets", tuple(sorted(pairs)))

    @classmethod
    def of(cls, value: StreamCut | str | Mapping[str, int]) -> StreamCut:
        """``value`` as a stream cut: one already, a word, or a cut mapping.

        Raises:
            InvalidArgumentError: naming ``value`` when it is none of those.
        """
        if isinstance(value, StreamCut):
            return value
        if isinstance(value, str):
            word = {"head": "earliest", "tail": "latest"}.get(value, value)
            if word == "earliest":
                return cls.earliest()
            if word == "latest":
                return cls.latest()
        elif isinstance(value, Mapping):
            return cls.offsets(value)
        msg = f"expected 'earliest', 'latest' or a stream cut mapping, got {value!r}"
        raise InvalidArgumentError(msg)

    @property
    def is_latest(self) -> bool:
        """Whether this is the tail of every open segment, taken when the read is planned."""
        return self.kind == "latest"

    def as_dict(self) -> dict[str, int]:
        """The cut as ``{segment: offset}`` (empty unless ``kind`` is ``"offsets"``)."""
        return dict(self.cut)

    def to_json(self) -> str:
        """``"earliest"``, ``"latest"`` or the cut's JSON, ``{"scope/stream/N": offset}``."""
        return json.dumps(self.as_dict(), sort_keys=True) if self.cut else self.kind

    def __repr__(self) -> str:
        if self.kind == "offsets":
            return f"StreamCut.offsets({self.as_dict()!r})"
        return f"StreamCut.{self.kind}()"


def start_state(
    client: StoreClient,
    streams: Sequence[str | StreamId],
    start: StreamCut | str | Mapping[str, int],
    end: Mapping[str, int] | None = None,
) -> GroupState:
    """The group state of a read of ``streams`` from ``start`` and, if given, up to cut ``end``.

    - :meth:`StreamCut.earliest`: each segment's first readable offset (as
      Kafka's earliest is the log start offset): the first segments from
      their heads; a segment a truncation took whole is finished, and its
      successors are looked at next;
    - :meth:`StreamCut.latest`: the open segments at their tails, with the
      store's watermark there; the sealed ones count as finished;
    - :meth:`StreamCut.offsets`: the cut's segments at its offsets; their
      ancestors count as finished.

    Watermarks elsewhere are the segments' initial ones (creation time - 1).
    Finished segments before the start are never read.

    Raises:
        InvalidArgumentError: a cut names a segment the streams do not have.
    """
    position = StreamCut.of(start)
    names = [str(s) for s in streams]
    descriptions = describe_streams(client, streams)
    segments = by_name(descriptions)
    bounded_to = None if end is None else _reachable(segments, names, end)
    if position.kind == "earliest":
        cut = {s.segment: 0 for d in descriptions for s in d.initial_segments}
        before: set[str] = set()
        watermarks = {name: initial_watermark(segments[name].creation_time) for name in cut}
    elif position.kind == "latest":
        infos = [client.segment_info(s.segment) for d in descriptions for s in d.open_segments]
        cut = {i.segment: i.write_offset for i in infos}
        before = {s.segment for d in descriptions for s in d.segments if s.sealed}
        watermarks = {i.segment: i.watermark for i in infos}
    else:
        cut = position.as_dict()
        unknown = sorted(set(cut) - set(segments))
        if unknown:
            msg = f"start cut names segments {unknown!r} that are not in streams {names!r}"
            raise InvalidArgumentError(msg)
        before = ancestors(segments, cut)
        watermarks = {name: initial_watermark(segments[name].creation_time) for name in cut}
    state = GroupState.starting_at(cut, watermarks, end_cut=end, bounded_to=bounded_to)
    state = replace(state, finished=frozenset(before))
    if position.kind == "earliest":
        state = _at_first_readable_offsets(client, state, segments)
    return state


def by_name(descriptions: Iterable[StreamDescription]) -> dict[str, SegmentDescription]:
    """The segments of ``descriptions`` by name."""
    return {s.segment: s for d in descriptions for s in d.segments}


def _reachable(
    segments: Mapping[str, SegmentDescription], names: list[str], end: Mapping[str, int]
) -> set[str]:
    """The segments an end cut lets a read reach: those in it and their ancestors."""
    unknown = sorted(set(end) - set(segments))
    if unknown:
        msg = f"end cut names segments {unknown!r} that are not in streams {names!r}"
        raise InvalidArgumentError(msg)
    return set(end) | ancestors(segments, end)


def _at_first_readable_offsets(
    client: StoreClient, state: GroupState, segments: Mapping[str, SegmentDescription]
) -> GroupState:
    """``state`` with each readable segment moved to its first readable offset.

    A truncation leaves a segment readable from its head on; a sealed
    segment whose data it took whole is finished, and its successors are
    looked at next.
    """
    segments = dict(segments)
    looked_at: set[str] = set()
    while todo := sorted(set(state.cursors) - looked_at):
        for segment in todo:
            looked_at.add(segment)
            info = client.segment_info(segment)
            if info.sealed and info.first_offset >= info.write_offset > 0:
                if not segments[segment].sealed:  # sealed since described: its successors are new
                    stream = SegmentId.parse(segment).stream_id
                    segments.update(by_name(describe_streams(client, [stream])))
                successors = [
                    Successor(d.segment, d.predecessors, d.creation_time)
                    for d in map(segments.__getitem__, segments[segment].successors)
                ]
                state = finish(state, segment, successors)
            elif info.first_offset > state.cursors[segment].offset:
                state = advance(state, segment, info.first_offset, state.cursors[segment].watermark)
    return state
