"""A query that asserts its watermark records itself as a stage of a pipeline (seed 001).

A query reading ``tidemark`` streams and writing one with ``assertWatermark``
is a stage: its input watermark is its reader group's, its output watermark
what it asserts (:mod:`spark_adapter.query_watermark`). After each committed
micro-batch the sink records the link (:class:`~connector.stages.StageLink`)
in the store, so ``tidemarkctl pipeline`` can draw the chain: stage
``spark-<query id>``, writer ``spark-<query id>-watermark``, the output
stream, and what it reads, from the batch's offset log: each ``tidemark``
source's offset names its streams and, with ``readerGroup``, the group the
query publishes its position as. Recording costs a state read per batch and
a write only when the link changed; a failure is logged, never raised (it
is for monitoring; the next batch records again).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from connector.client import StoreClient
from connector.errors import TidemarkError
from connector.stages import StageLink, record_stage
from spark_adapter.options import SinkOptions
from spark_adapter.query_watermark import checkpoint_folder, query_id

__all__ = ["query_stage", "record_query_stage", "source_offsets"]

_log = logging.getLogger(__name__)


def source_offsets(folder: str, batch_id: int) -> list[dict[str, Any]]:
    """The offsets of the ``tidemark`` sources batch ``batch_id`` ran to, from the offset log."""
    with open(os.path.join(folder, "offsets", str(batch_id)), encoding="utf-8") as log:
        lines = log.read().splitlines()[2:]  # the version, then the batch's metadata
    offsets = []
    for line in lines:
        try:
            offset = json.loads(line)
        except ValueError:
            continue  # another source's offset, in a form of its own
        if isinstance(offset, dict) and isinstance(offset.get("streams"), dict):
            offsets.append(offset)
    return offsets


def query_stage(options: SinkOptions, batch_id: int) -> StageLink:
    """The stage the query writing with ``options`` is, as of batch ``batch_id``."""
    folder = checkpoint_folder(options.checkpoint_location)
    offsets = source_offsets(folder, batch_id)
    inputs = tuple(dict.fromkeys(name for o in offsets for name in o["streams"]))
    groups = [str(o["readerGroup"]) for o in offsets if o.get("readerGroup")]
    name = f"spark-{query_id(folder)}"
    return StageLink(
        name=name,
        engine="spark",
        inputs=inputs,
        output=str(options.stream),
        writer=f"{name}-watermark",
        group=groups[0] if len(groups) == 1 else None,
    )


def record_query_stage(options: SinkOptions, batch_id: int) -> StageLink | None:
    """Records the query's stage in the store; returns it (None: not recorded, logged)."""
    try:
        link = query_stage(options, batch_id)
        with StoreClient(options.uri) as client:
            record_stage(client, link)
    except (OSError, TidemarkError) as error:
        _log.warning("the query's stage is not recorded: %s: %s", type(error).__name__, error)
        return None
    return link
