"""Stages: jobs chained through streams, each with an input and an output watermark (seed 001).

- :mod:`.link`: :class:`~connector.stages.link.StageLink`, what a job
  records when it starts: the streams (and reader group) it reads, the
  stream it writes and the writer whose assertions are its output
  watermark; a plain value, and the state key it is kept under.
- :mod:`.chain`: pure rules over plain values: a stage's input and output
  watermark, its event-time latency, and the order of a chain.
- :mod:`.records`: recording a link in the store, reading a scope's, forgetting one.
"""

from connector.stages.chain import (
    StageTimes,
    chain_order,
    chains,
    event_time_latency,
    stage_times,
)
from connector.stages.link import STAGE_KEY_PREFIX, StageLink, stage_key
from connector.stages.records import forget_stage, read_stages, record_stage

__all__ = [
    "STAGE_KEY_PREFIX",
    "StageLink",
    "StageTimes",
    "chain_order",
    "chains",
    "event_time_latency",
    "forget_stage",
    "read_stages",
    "record_stage",
    "stage_key",
    "stage_times",
]
