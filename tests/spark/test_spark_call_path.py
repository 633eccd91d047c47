"""The Spark driver's ``latestOffset`` plans with one call into the core, which never calls back.

The reader core does the planning; the adapter only maps Spark's offsets and
read limit to the core's frontier and budget and back (:mod:`tests.layers`).
"""

from __future__ import annotations

from spark_adapter.options import for_stream, read_spec
from spark_adapter.reading import TidemarkStreamReader
from spark_adapter.schema import tidemark_schema
from tests.layers import call_path

from .conftest import SyntheticStore


def test_latest_offset_enters_the_core_for_one_plan_and_the_core_never_climbs_back(
    synthetic_store: SyntheticStore,
) -> None:
    store = synthetic_store
    stream = store.create_stream(segments=2)
    with store.writer(stream) as writer:
        for n in range(10):
            writer.write_event({"n": n}, routing_key=f"k{n}")
    options = {"uri": store.uri, "stream": stream, "timeDomain": "IngestionTime"}
    spec = for_stream(read_spec({**options, "maxEventsPerTrigger": "4"}))
    reader = TidemarkStreamReader(spec, tidemark_schema(spec.deserializer))
    start = reader.initialOffset()
    try:
        path = call_path(
            lambda: reader.latestOffset(start, reader.getDefaultReadLimit()), "spark_adapter"
        )
    finally:
        reader.stop()
    assert path.climbs == []
    plans = [entry for entry in path.entries if ".SourcePlanner." in entry]
    assert plans == ["connector.reader.source.planner.SourcePlanner.next"], path.entries
    print("latestOffset's calls into the core:", path.entries)
