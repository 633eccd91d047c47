"""A query's event-time watermark asserted on the stream it writes (seed 004, per job).

With the sink's ``assertWatermark`` option, after each committed micro-batch
the query asserts its event-time watermark on the stream it writes, as a
writer of its own (:meth:`connector.client.StoreClient.assert_watermark`):
no row it writes later has an event time at or below it. A query reading
that stream in the event-time domain then has, as its input watermark, this
query's output watermark: a pipeline of queries chained through Tidemark
streams has a watermark per stage, as seed 004 proposes per operation.

What Spark gives a sink to learn the watermark: ``commit(messages, batchId)``
runs on the driver with no session and no watermark, but Spark hands the
sink the query's ``checkpointLocation`` option, and the checkpoint's offset
log holds, for each batch, the watermark it ran with
(``offsets/<batchId>``: ``v1``, then ``{"batchWatermarkMs": ...}``); its
``metadata`` holds the query's id, kept across restarts.

The rule: after batch ``N`` the query asserts the watermark ``W`` batch ``N``
ran with. In append mode a window's row comes out in the first batch whose
watermark is at or past the window's end, so every row of a later batch
belongs to a window ending after ``W``: stamped with its window's end (not
its start), each is above ``W``. The writer id is
``spark-<queryId>-watermark``; the assertion's number is the batch id, so a
batch run again after a restart asserts nothing twice, and its watermark is
the same (it is in the offset log before the batch runs). A query whose
watermark is still 0 (no event time seen) asserts nothing. A stopped query
asserts nothing more: the store marks its writer idle after
``--writer-idle-timeout-ms``.

Only a checkpoint this Python process can read will do: a local path or a
``file:`` URI (on a cluster, a file system mounted on the driver).
"""

from __future__ import annotations

import json
import logging
import os
from urllib.parse import urlparse

from connector.client import StoreClient
from connector.errors import InvalidArgumentError
from spark_adapter.options import SinkOptions

__all__ = ["assert_query_watermark", "batch_watermark", "checkpoint_folder", "query_id"]

_log = logging.getLogger(__name__)


def checkpoint_folder(location: str | None) -> str:
    """The local folder of a query's ``checkpointLocation``.

    Raises:
        InvalidArgumentError: no location, or one on a file system this
            process cannot read (naming the option).
    """
    if not location:
        msg = (
            "option 'assertWatermark' needs the query's checkpointLocation as an option of "
            "writeStream (.option('checkpointLocation', ...)): the query's watermark is read "
            "from its checkpoint"
        )
        raise InvalidArgumentError(msg)
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else location
    msg = (
        f"option 'assertWatermark' reads the query's watermark from its checkpoint, and "
        f"checkpointLocation {location!r} is not on a file system the driver's Python reads "
        "(a local path or a file: URI)"
    )
    raise InvalidArgumentError(msg)


def batch_watermark(folder: str, batch_id: int) -> int:
    """The event-time watermark batch ``batch_id`` ran with (0: none yet), from the offset log."""
    with open(os.path.join(folder, "offsets", str(batch_id)), encoding="utf-8") as log:
        lines = log.read().splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        msg = f"the offset log of batch {batch_id} in {folder!r} is not Spark's: {lines[:2]!r}"
        raise InvalidArgumentError(msg)
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0))


def query_id(folder: str) -> str:
    """The query's id, kept in its checkpoint's ``metadata`` across restarts."""
    with open(os.path.join(folder, "metadata"), encoding="utf-8") as metadata:
        return str(json.loads(metadata.readline())["id"])


def assert_query_watermark(options: SinkOptions, batch_id: int) -> int | None:
    """Asserts the watermark batch ``batch_id`` ran with on the sink's stream; returns it.

    None when there is none yet (0). Durable on return; the number is the
    batch id, so asserting a batch again changes nothing.
    """
    folder = checkpoint_folder(options.checkpoint_location)
    watermark = batch_watermark(folder, batch_id)
    if watermark <= 0:
        return None
    writer_id = f"spark-{query_id(folder)}-watermark"
    stream = options.stream
    with StoreClient(options.uri) as client:
        client.assert_watermark(stream.scope, stream.stream, writer_id, batch_id, watermark)
    _log.info("micro-batch %d asserted watermark %d on %s", batch_id, watermark, stream)
    return watermark
