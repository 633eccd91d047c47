"""Data dirs written by earlier versions of the store open and serve what they held.

Under ``data/`` are four data dirs written by the store itself with the same
workload (two streams, appends with and without routing keys, an idle tick, a
split and a merge, an append large enough for sparse boundaries, state values,
a stream sealed, deleted and created again, an empty scope): ``journal`` with
the whole history in the journal, ``compacted`` with the journal compacted
after every group; ``before_event_counts`` by the version before appends
recorded their event counts, ``with_event_counts`` by the version after.
``expected.json`` is what those versions served from them: every stream,
segment, event (offset, ingestion time, routing key, size, CRC-32), the
watermark after each event, and the state values.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import zlib
from typing import Any

import pytest

from connector.clock import ManualClock
from connector.framing import iter_frames
from connector.store import SegmentStore, StoreConfig

DATA = pathlib.Path(__file__).parent / "data"
DIRS = [
    f"{version}/{layout}"
    for version in ("before_event_counts", "with_event_counts")
    for layout in ("journal", "compacted")
]


def _served(store: SegmentStore) -> dict[str, Any]:
    """Everything ``expected.json`` records, as ``store`` serves it now."""
    served: dict[str, Any] = {"scopes": store.scopes(), "streams": {}, "state": {}}
    for scope, stream in store.stream_ids():
        description = store.describe_stream(scope, stream)
        segments = {}
        for s in description.segments:
            info = store.segment_info(s.segment)
            events = []
            offset = 0
            while True:
                read = store.read(s.segment, offset, max_bytes=1 << 20)
                events.extend(
                    [
                        f.offset,
                        f.ingestion_time,
                        f.routing_key,
                        len(f.payload),
                        zlib.crc32(f.payload),
                    ]
                    for f in iter_frames(read.data, base_offset=offset)
                )
                if read.next_offset == offset:
                    break
                offset = read.next_offset
            segments[s.segment] = {
                "key_low": s.key_low,
                "key_high": s.key_high,
                "epoch": s.epoch,
                "sealed": s.sealed,
                "creation_time": s.creation_time,
                "predecessors": list(s.predecessors),
                "successors": list(s.successors),
                "write_offset": info.write_offset,
                "last_write_time": info.last_write_time,
                "watermark": info.watermark,
                "events": events,
                "watermarks_after": [
                    store.read(s.segment, e[0], max_bytes=1).watermark for e in events
                ],
            }
        served["streams"][f"{scope}/{stream}"] = {
            "epoch": description.epoch,
            "sealed": description.sealed,
            "segments": segments,
        }
    for key in ("readergroup/iot/g", "plain-key"):
        value = store.get_state(key)
        served["state"][key] = [value.value.hex(), value.revision]
    return served


def _expected() -> dict[str, Any]:
    return json.loads((DATA / "expected.json").read_text())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_800_000_000_000)  # later than every time in the data dirs


@pytest.mark.parametrize("written", DIRS)
def test_an_earlier_data_dir_opens_and_serves_what_it_held(tmp_path, clock, written):
    data_dir = tmp_path / "data"
    shutil.copytree(DATA / written, data_dir)
    with SegmentStore(StoreConfig(str(data_dir), clock=clock, polling_period_ms=None)) as store:
        assert _served(store) == _expected()


@pytest.mark.parametrize("written", DIRS)
def test_an_earlier_data_dir_takes_changes_and_keeps_them_over_a_restart(tmp_path, clock, written):
    data_dir = tmp_path / "data"
    shutil.copytree(DATA / written, data_dir)
    config = StoreConfig(str(data_dir), clock=clock, polling_period_ms=None)
    with SegmentStore(config) as store:
        before = store.segment_info("iot/sensors/4")
        appended = store.append("iot/sensors/4", "w1", 1, [b"later"] * 3, ["A", "B", "C"])
        assert appended.write_offset > before.write_offset
        plan = store.plan_read("iot/sensors/4", 0, max_events=2)
        assert (plan.events, plan.at_tail) == (2, False)
        served = _served(store)
    with SegmentStore(config) as store:
        assert _served(store) == served
        events = served["streams"]["iot/sensors"]["segments"]["iot/sensors/4"]["events"]
        assert [e[2] for e in events] == ["A", "A", "B", "C"]
