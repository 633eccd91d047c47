"""The PySpark adapter: the ``tidemark`` format for reading and writing, and event-time helpers.

    import spark_adapter
    spark_adapter.register(spark)
    readings = (spark.readStream.format("tidemark")
                .option("uri", uri).option("stream", "iot/sensors")
                .option("timeDomain", "IngestionTime").load())
    events = spark_adapter.event_time(readings)  # then plain Spark: window(), joins, ...

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
    from spark_adapter.json_fields import with_json_fields
    from spark_adapter.late_counts import observe_late
    from spark_adapter.ordering import order_by_event_time, split_late
    from spark_adapter.watermark import event_time, with_connector_watermark
    from spark_adapter.windows import tumbling_window_count, window_count

#: The helpers on DataFrames, each by the module it lives in (imported on first use).
_HELPERS = {
    "event_time": "watermark",
    "with_connector_watermark": "watermark",
    "with_json_fields": "json_fields",
    "observe_late": "late_counts",
    "order_by_event_time": "ordering",
    "split_late": "ordering",
    "tumbling_window_count": "windows",
    "window_count": "windows",
}

__all__ = [
    "SinkOptions",
    "TidemarkDataSource",
    "event_time",
    "local_session",
    "observe_late",
    "order_by_event_time",
    "parse_interval_ms",
    "read_spec",
    "register",
    "split_late",
    "tidemark_schema",
    "tumbling_window_count",
    "window_count",
    "with_connector_watermark",
    "with_json_fields",
]


def __getattr__(name: str) -> object:
    # The helpers import pyspark.sql.functions (and pandas); a query's source process needs none.
    if name in _HELPERS:
        import importlib

        return getattr(importlib.import_module(f"spark_adapter.{_HELPERS[name]}"), name)
    msg = f"module 'spark_adapter' has no attribute {name!r}"
    raise AttributeError(msg)
