"""The rules of stages over plain values: watermarks, event-time latency, a chain's order."""

from __future__ import annotations

import pytest

from connector.errors import InvalidArgumentError
from connector.stages import StageLink, chain_order, chains, event_time_latency, stage_times
from connector.stages.chain import FROM_GROUP, FROM_STREAMS, output_watermark
from connector.timestamps import END_OF_TIME


def link(name: str, inputs: tuple[str, ...], output: str, **kw: object) -> StageLink:
    return StageLink(name, "spark", inputs, output, f"{name}-watermark", **kw)  # type: ignore[arg-type]


def test_a_stage_holds_its_input_minus_its_output_watermark_as_event_time_latency() -> None:
    one = link("one", ("p/readings",), "p/counts", group="p/g")
    times = stage_times(
        one, 5_000, FROM_GROUP, [("one-watermark", 3_000), ("sensor-a", 1_000), ("x", 0)]
    )
    assert (times.input_watermark, times.output_watermark, times.latency_ms) == (
        5_000,
        3_000,
        2_000,
    )
    assert times.input_from == FROM_GROUP


def test_a_stage_whose_writer_asserts_nothing_has_no_output_watermark_nor_latency() -> None:
    one = link("one", ("p/readings",), "p/counts")
    times = stage_times(one, 5_000, FROM_STREAMS, [("someone-else", 9_000)])
    assert times.output_watermark is None and times.latency_ms is None
    assert event_time_latency(None, 3) is None


def test_an_input_no_writer_holds_is_not_known() -> None:
    times = stage_times(link("one", ("p/a",), "p/b"), END_OF_TIME, FROM_GROUP, [])
    assert times.input_watermark is None


def test_a_prefix_stage_takes_the_least_of_its_subtasks_assertions() -> None:
    flink = StageLink("job", "flink", ("p/a",), "p/b", "job", writer_is_prefix=True)
    pairs = [("job-0", 7_000), ("job-1", 6_000), ("jobber-0", 1), ("job", 2)]
    assert output_watermark(flink, pairs) == 6_000


def test_stages_come_upstream_first_and_each_path_downstream() -> None:
    first = link("z-first", ("p/raw",), "p/clean")
    second = link("a-second", ("p/clean",), "p/counts")
    third = link("m-third", ("p/counts", "p/other"), "p/totals")
    side = link("b-side", ("p/clean",), "p/audit")
    alone = link("c-alone", ("q/x",), "p/y")
    assert [s.name for s in chain_order([third, side, second, alone, first])] == [
        "c-alone",
        "z-first",
        "a-second",
        "b-side",
        "m-third",
    ]
    assert [[s.name for s in path] for path in chains([third, side, second, alone, first])] == [
        ["c-alone"],
        ["z-first", "a-second", "m-third"],
        ["z-first", "b-side"],
    ]


def test_a_cycle_of_stages_is_still_shown_once_each() -> None:
    a, b = link("a", ("p/y",), "p/x"), link("b", ("p/x",), "p/y")
    assert [s.name for s in chain_order([b, a])] == ["a", "b"]
    assert [[s.name for s in path] for path in chains([a, b])] == [["a", "b"]]


def test_a_link_round_trips_through_its_stored_form_and_refuses_a_bad_stream() -> None:
    one = link("one", ("p/readings",), "p/counts", group="p/g")
    assert StageLink.from_json(one.to_json()) == one
    assert one.key == "stage/p/one"
    with pytest.raises(InvalidArgumentError, match="'counts'"):
        link("one", ("p/readings",), "counts")
    with pytest.raises(InvalidArgumentError, match="invalid stage link"):
        StageLink.from_json(b'{"name": "x"}')
