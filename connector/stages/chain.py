"""A stage's watermarks and a chain's order: pure rules over plain values (seed 001).

- The **input watermark** of a stage is the event time its reader group has
  reached (the writers' event time at the group's position, the event-time
  domain's perfect watermark there); for a stage whose group position the
  store does not keep (a Flink job, a Spark query without ``readerGroup``),
  the event time its input streams' writers assert at their tails stands
  in: the seed's input watermark of a stage is its upstream stages' output
  watermark, and that is what they asserted.
- The **output watermark** is the least event time the stage's writer(s)
  assert on its output stream (over its open segments): what a stage
  downstream reads as its input.
- The **event-time latency** of a stage is the difference between the two,
  input minus output: how much event time the stage holds inside itself
  (windows not yet closed, batches not yet committed).

A time of None means not known: no writer holds it, or the stage asserted
nothing yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from connector.stages.link import StageLink
from connector.timestamps import END_OF_TIME

__all__ = [
    "FROM_GROUP",
    "FROM_STREAMS",
    "StageTimes",
    "chain_order",
    "chains",
    "event_time_latency",
    "output_watermark",
    "stage_times",
]

#: Where an input watermark came from: the stage's reader group's position...
FROM_GROUP = "group"
#: ...or, with no group position in the store, its input streams' asserted event time.
FROM_STREAMS = "streams"


@dataclass(frozen=True)
class StageTimes:
    """A stage with its input and output watermark and its event-time latency (epoch ms).

    ``input_from`` says where the input watermark came from (:data:`FROM_GROUP`
    or :data:`FROM_STREAMS`).
    """

    link: StageLink
    input_watermark: int | None
    input_from: str
    output_watermark: int | None
    latency_ms: int | None


def _known(event_time: int | None) -> int | None:
    """An event time, None when not known or when no writer holds it (the end of time)."""
    return None if event_time is None or event_time >= END_OF_TIME else event_time


def event_time_latency(input_watermark: int | None, output_watermark: int | None) -> int | None:
    """Input minus output watermark, ms: the stage's event-time latency (None: one not known)."""
    if input_watermark is None or output_watermark is None:
        return None
    return input_watermark - output_watermark


def output_watermark(link: StageLink, assertions: Iterable[tuple[str, int]]) -> int | None:
    """The least event time the stage's writers assert among ``(writer id, event time)`` pairs.

    ``assertions`` are the active writers of the output stream's open
    segments; None when none of them is the stage's.
    """
    times = [t for writer, t in assertions if link.writes_as(writer)]
    return min(times, default=None)


def stage_times(
    link: StageLink,
    input_watermark: int | None,
    input_from: str,
    assertions: Iterable[tuple[str, int]],
) -> StageTimes:
    """The stage's times, from its input watermark and its output stream's active assertions."""
    given = _known(input_watermark)
    out = output_watermark(link, assertions)
    return StageTimes(link, given, input_from, out, event_time_latency(given, out))


def _downstream(links: Sequence[StageLink]) -> dict[str, list[StageLink]]:
    """For each stage, the stages that read its output stream (by name)."""
    return {
        a.name: sorted((b for b in links if a.output in b.inputs and b is not a), key=_name)
        for a in links
    }


def _name(link: StageLink) -> str:
    return link.name


def chain_order(links: Iterable[StageLink]) -> list[StageLink]:
    """The stages upstream first: a stage comes after every stage whose output it reads.

    Ties go by name; stages in a cycle (which a pipeline should not have)
    come last, by name.
    """
    pending = sorted(links, key=_name)
    after = _downstream(pending)
    upstream = {s.name: sum(s in after[u.name] for u in pending) for s in pending}
    ordered: list[StageLink] = []
    ready = [s for s in pending if upstream[s.name] == 0]
    while ready:
        stage = ready.pop(0)
        ordered.append(stage)
        for b in after[stage.name]:
            upstream[b.name] -= 1
            if upstream[b.name] == 0:
                ready = sorted([*ready, b], key=_name)
    return ordered + [s for s in pending if s not in ordered]


def chains(links: Iterable[StageLink]) -> list[list[StageLink]]:
    """Every path through the stages from a stage no other stage feeds, downstream.

    A stage read by two stages starts two paths; a stage in a cycle ends a
    path where it would repeat. Every stage is on at least one path.
    """
    ordered = chain_order(links)
    after = _downstream(ordered)
    fed = {b.name for bs in after.values() for b in bs}
    heads = [s for s in ordered if s.name not in fed]
    paths: list[list[StageLink]] = []

    def walk(path: list[StageLink]) -> None:
        nexts = [b for b in after[path[-1].name] if b not in path]
        if not nexts:
            paths.append(path)
        for b in nexts:
            walk([*path, b])

    for head in heads:
        walk([head])
    covered = {s.name for p in paths for s in p}
    for stage in ordered:  # a cycle with no head
        if stage.name not in covered:
            walk([stage])
            covered |= {s.name for p in paths for s in p}
    return paths
