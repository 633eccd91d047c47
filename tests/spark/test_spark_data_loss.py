"""A damaged event under a streaming query: the query fails, naming the segment and offset.

Spark runs the failed task again as often as ``spark.task.maxFailures``
lets it (twice here, ``local[2,2]``); each attempt meets the same
``DATA_LOSS`` and the query ends with it, rather than reading on without
the event or retrying for ever.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from pyspark.errors.exceptions.captured import StreamingQueryException

from connector.framing import iter_frames
from tests.probes import flip_stored_bit

from .conftest import BatchLog, SyntheticStore
from .test_spark_streaming import source, write_rounds

pytestmark = pytest.mark.slow


def test_a_streaming_query_over_a_damaged_event_fails_naming_it(
    spark: Any, synthetic_store: SyntheticStore, tmp_path: pathlib.Path
) -> None:
    store = synthetic_store
    stream = store.create_stream(segments=1)
    write_rounds(store, stream, range(4), ["k0"])
    segment = f"{stream}/0"
    frames = list(iter_frames(store.client.read(segment, 0, 1 << 20).data))
    flip_stored_bit(store.server, segment, frames[2].end - 1)
    log = BatchLog()
    query = (
        source(spark, store, stream)
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        damage = f"data loss in segment '{segment}' at offset {frames[2].offset}"
        with pytest.raises(StreamingQueryException, match=damage):
            query.awaitTermination(120)
    finally:
        query.stop()
    assert log.rows() == []  # nothing of the batch holding the damage was handed on
