"""The PySpark adapter: the ``tidemark`` format for reading and writing, and event-time helpers.

    import spark_adapter
    spark_adapter.register(spark)
    events = (spark.readStream.format("tidemark")
              .option("uri", uri).option("stream", "iot/sensors")
              .option("timeDomain", "IngestionTime").load())
    ordered = spark_adapter.order_by_event_time(spark_adapter.with_connector_watermark(events))

Needs pyspark 4.2 or later (the Python data source API with admission
control: ``ReadLimit``, ``latestOffset(start, limit)``; tested on 4.3) and
Spark's Python workers running this interpreter (``PYSPARK_PYTHON``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_adapter.options import SinkOptions, parse_interval_ms, read_spec
from spark_adapter.schema import tidemark_schema
from spark_adapter.session import local_session, register
from spark_adapter.source import TidemarkDataSource

if TYPE_CHECKING:
    from spark_adapter.event_time import (
        order_by_event_time,
        split_late,
        tumbling_window_count,
        window_count,
        with_connector_watermark,
    )

_EVENT_TIME_HELPERS = frozenset(
    {
        "order_by_event_time",
        "split_late",
        "tumbling_window_count",
        "window_count",
        "with_connector_watermark",
    }
)

__all__ = [
    "SinkOptions",
    "TidemarkDataSource",
    "local_session",
    "order_by_event_time",
    "parse_interval_ms",
    "read_spec",
    "register",
    "split_late",
    "tidemark_schema",
    "tumbling_window_count",
    "window_count",
    "with_connector_watermark",
]


def __getattr__(name: str) -> object:
    # The event-time helpers import pandas; a query's source process needs none of it.
    if name in _EVENT_TIME_HELPERS:
        from spark_adapter import event_time

        return getattr(event_time, name)
    msg = f"module 'spark_adapter' has no attribute {name!r}"
    raise AttributeError(msg)
