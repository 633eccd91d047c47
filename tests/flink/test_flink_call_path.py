"""The Flink coordinator plans an epoch with one call into the reader core, which never calls back.

The coordinator's keyed state and metrics are replaced by plain holders:
what is looked at is the path of ``_plan_next_epoch`` between the adapter
and the core (:mod:`tests.layers`), not Flink. Its store calls run on its
store thread, as in a job (the path follows them there).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from connector import EventWriter, JsonSerializer, StoreClient, StreamManager
from connector.reader.progress_watch import ProgressWatch
from connector.reader.source import SourcePlanner
from flink_adapter import FlinkTidemarkReader, TimeDomain
from flink_adapter.epoch_plans import EpochPlans
from flink_adapter.functions import EpochCoordinator
from flink_adapter.store_thread import StoreThread
from tests.flink.holders import Value
from tests.layers import call_path


def test_an_epoch_enters_the_core_for_one_plan_and_the_core_never_climbs_back(start_store):
    server = start_store()
    client = StoreClient(server.uri)
    StreamManager(client).create_scope("c")
    StreamManager(client).create_stream("c", "s", 2)
    with EventWriter(client, "c/s", JsonSerializer()) as writer:
        for n in range(10):
            writer.write_event({"n": n}, routing_key=f"k{n}")
    reader = (
        FlinkTidemarkReader.builder()
        .with_store(server.uri)
        .for_stream("c/s")
        .with_time_domain(TimeDomain.INGESTION_TIME)
        .with_epoch_budget(max_events=4)
        .build()
    )
    coordinator = EpochCoordinator(reader.settings)
    coordinator._frontier, coordinator._epoch = Value(), Value()  # noqa: SLF001
    coordinator._planner = SourcePlanner(client, reader.settings.spec)  # noqa: SLF001
    coordinator._frontier.update(coordinator._planner.start().to_json())  # noqa: SLF001
    for metric in ("_group_watermark", "_lag_ms", "_watermark_lag", "_pending_records"):
        setattr(coordinator, metric, Value())
    coordinator._figures = defaultdict(Value)  # noqa: SLF001
    spec = reader.settings.spec
    coordinator._watch = ProgressWatch("job", spec.stream_names, logging.getLogger(__name__))  # noqa: SLF001
    coordinator._pending_counted_at = 0  # noqa: SLF001
    # Its thread starts with the first call, inside call_path, which follows it there.
    coordinator._store = StoreThread("call-path")  # noqa: SLF001
    coordinator._plans = EpochPlans(coordinator._store, coordinator._planner, 0)  # noqa: SLF001

    records: list[Any] = []
    path = call_path(
        lambda: records.extend(coordinator._plan_next_epoch()),  # noqa: SLF001
        "flink_adapter",
    )
    coordinator._store.close()  # noqa: SLF001
    client.close()
    assert path.climbs == []
    plans = [entry for entry in path.entries if ".SourcePlanner." in entry]
    assert plans == ["connector.reader.source.planner.SourcePlanner.step"], path.entries
    assert records, "the epoch planned tasks and its end"
    print("_plan_next_epoch's calls into the core:", path.entries)
