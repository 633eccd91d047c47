"""Scaling through the stream manager names segments as everything else does: ``scope/stream/N``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connector.client import StoreClient, StreamManager
from connector.errors import InvalidArgumentError, SegmentSealedError


@pytest.fixture
def manager(store_client: StoreClient) -> Iterator[StreamManager]:
    manager = StreamManager(store_client)
    manager.create_scope("sm")
    manager.create_stream("sm", "a", 2)
    manager.create_stream("sm", "b", 1)
    yield manager


def open_names(manager: StreamManager, stream: str) -> list[str]:
    return sorted(s.segment for s in manager.describe_stream("sm", stream).open_segments)


def test_split_and_merge_take_segment_names(manager: StreamManager) -> None:
    manager.split_segment("sm/a/0", into=3)
    assert open_names(manager, "a") == ["sm/a/1", "sm/a/2", "sm/a/3", "sm/a/4"]
    manager.merge_segments(["sm/a/4", "sm/a/1"])
    assert open_names(manager, "a") == ["sm/a/2", "sm/a/3", "sm/a/5"]


def test_the_older_scope_stream_number_form_still_works(manager: StreamManager) -> None:
    manager.split_segment("sm", "a", 0)
    manager.split_segment("sm", "a", "sm/a/1", 2)
    manager.merge_segments("sm", "a", [3, "sm/a/4"])
    assert open_names(manager, "a") == ["sm/a/2", "sm/a/5", "sm/a/6"]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m.split_segment("sm/a"), "'sm/a'"),
        (lambda m: m.split_segment("sm", "a", "sm/b/0"), "'sm/b/0' is not in stream 'sm/a'"),
        (lambda m: m.split_segment("sm", "a", -1), "-1"),
        (lambda m: m.split_segment("sm", "a"), "no segment given"),
        (lambda m: m.merge_segments(["sm/a/0", "sm/b/0"]), "one stream"),
        (lambda m: m.merge_segments("sm/a/0"), "list of segment names"),
    ],
)
def test_bad_segment_names_are_refused_naming_the_value(
    manager: StreamManager, call: object, match: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        call(manager)  # type: ignore[operator]


def test_splitting_a_sealed_segment_names_it(manager: StreamManager) -> None:
    manager.split_segment("sm/b/0")
    with pytest.raises(SegmentSealedError):
        manager.split_segment("sm/b/0")
