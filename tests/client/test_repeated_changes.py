"""A change whose answer was lost is repeated, and the repeat counts it made, not refused.

Against a real store server process behind a proxy that loses the first
answer of the call under test, after the store made the change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from connector import StoreClient, StreamManager
from connector.client.repeats import scale_made, state_untouched, state_written, stream_created
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    NotFoundError,
    OutcomeUnknownError,
    SegmentSealedError,
)
from connector.model import SegmentDescription, StateValue, StreamDescription
from tests.client.answer_dropping_proxy import AnswerDroppingProxy

pytestmark = pytest.mark.storages("file", "jetstream")


@pytest.fixture
def server(tmp_path, spawn_server):
    return spawn_server(tmp_path / "data")


@pytest.fixture
def through_proxy(server) -> Iterator[Callable[[str], tuple[StoreClient, AnswerDroppingProxy]]]:
    """``through_proxy(method)``: a client whose first ``method`` call loses its answer."""
    opened: list[tuple[StoreClient, AnswerDroppingProxy]] = []

    def open_client(method: str) -> tuple[StoreClient, AnswerDroppingProxy]:
        proxy = AnswerDroppingProxy(server.address, drop={method})
        client = StoreClient(proxy.uri, retry_timeout_s=20.0)
        opened.append((client, proxy))
        return client, proxy

    yield open_client
    for client, proxy in opened:
        client.close()
        proxy.close()


@pytest.fixture
def direct(server) -> Iterator[StoreClient]:
    with StoreClient(server.uri) as client:
        yield client


def test_a_scope_created_once_though_its_answer_was_lost(through_proxy, direct):
    client, proxy = through_proxy("CreateScope")
    client.create_scope("s")
    assert proxy.dropped == ["CreateScope"]
    with pytest.raises(AlreadyExistsError):  # a real second creation is still refused
        direct.create_scope("s")


def test_a_stream_created_once_though_its_answer_was_lost(through_proxy, direct):
    direct.create_scope("s")
    client, proxy = through_proxy("CreateStream")
    description = client.create_stream("s", "t", segment_count=3)
    assert proxy.dropped == ["CreateStream"]
    assert [s.segment for s in description.segments] == ["s/t/0", "s/t/1", "s/t/2"]
    assert description == direct.describe_stream("s", "t")


def test_a_split_made_once_though_its_answer_was_lost(through_proxy, direct):
    direct.create_scope("s")
    direct.create_stream("s", "t", 1)
    client, proxy = through_proxy("ScaleStream")
    description = client.scale_stream("s", "t", [0], split_count=2)
    assert proxy.dropped == ["ScaleStream"]
    assert description.epoch == 1
    assert [s.segment for s in description.open_segments] == ["s/t/1", "s/t/2"]
    assert description == direct.describe_stream("s", "t")
    with pytest.raises(SegmentSealedError):  # splitting it again is still refused
        direct.scale_stream("s", "t", [0], split_count=2)


def test_a_merge_made_once_though_its_answer_was_lost(through_proxy, direct):
    direct.create_scope("s")
    direct.create_stream("s", "t", 2)
    client, proxy = through_proxy("ScaleStream")
    description = StreamManager(client).merge_segments(["s/t/0", "s/t/1"])
    assert proxy.dropped == ["ScaleStream"]
    [merged] = description.open_segments
    assert (merged.segment, merged.key_low, merged.key_high) == ("s/t/2", 0.0, 1.0)


def test_a_seal_and_a_delete_made_once_though_their_answers_were_lost(through_proxy, direct):
    direct.create_scope("s")
    direct.create_stream("s", "t", 2)
    client, proxy = through_proxy("SealStream")
    assert client.seal_stream("s", "t").sealed
    assert proxy.dropped == ["SealStream"]
    with pytest.raises(FailedPreconditionError, match="sealed already"):
        direct.seal_stream("s", "t")  # a real second seal is still refused
    client, proxy = through_proxy("DeleteStream")
    client.delete_stream("s", "t")
    assert proxy.dropped == ["DeleteStream"]
    with pytest.raises(NotFoundError):
        direct.describe_stream("s", "t")


def test_a_compare_and_set_written_once_though_its_answer_was_lost(through_proxy, direct):
    client, proxy = through_proxy("CompareAndSetState")
    written, current = client.compare_and_set_state("readergroup/s/g", 0, b"position")
    assert proxy.dropped == ["CompareAndSetState"]
    assert written
    assert (current.value, current.revision) == (b"position", 1)
    assert direct.compare_and_set_state("readergroup/s/g", 0, b"other")[0] is False


def test_a_compare_and_set_overtaken_before_its_repeat_is_unknown_never_not_written(
    through_proxy, direct
):
    key = "counter/overtaken"
    client, proxy = through_proxy("CompareAndSetState")
    # Its answer lost, then another writer replaces the value before the repeat.
    proxy.lose("CompareAndSetState", meanwhile=lambda: direct.compare_and_set_state(key, 1, b"b"))
    with pytest.raises(OutcomeUnknownError, match="whether it was made is unknown"):
        client.compare_and_set_state(key, 0, b"a")
    assert direct.get_state(key).value == b"b"  # over "a", which was written


def test_a_deletion_overtaken_before_its_repeat_is_unknown_never_not_deleted(through_proxy, direct):
    key = "counter/overtaken"
    direct.compare_and_set_state(key, 0, b"a")
    client, proxy = through_proxy("DeleteState")
    # Its answer lost, then another writer stores a value again before the repeat.
    proxy.lose("DeleteState", meanwhile=lambda: direct.compare_and_set_state(key, 0, b"b"))
    with pytest.raises(OutcomeUnknownError, match="whether it was made is unknown"):
        client.delete_state(key, 1)
    assert direct.get_state(key).value == b"b"  # after "a" was deleted


# --- what counts as made (pure functions) ------------------------------------------


def _segment(n: int, low: float, high: float, **lineage: tuple[str, ...]) -> SegmentDescription:
    return SegmentDescription(
        f"s/t/{n}",
        low,
        high,
        epoch=0 if not lineage.get("predecessors") else 1,
        sealed=bool(lineage.get("successors")),
        creation_time=0,
        predecessors=lineage.get("predecessors", ()),
        successors=lineage.get("successors", ()),
    )


def _stream(*segments: SegmentDescription, epoch: int = 0, sealed: bool = False):
    return StreamDescription("s", "t", epoch, sealed, segments)


def test_a_stream_changed_since_its_creation_is_not_counted_created():
    assert stream_created(_stream(_segment(0, 0.0, 0.5), _segment(1, 0.5, 1.0)), 2)
    assert not stream_created(_stream(_segment(0, 0.0, 0.5), _segment(1, 0.5, 1.0)), 3)
    assert not stream_created(_stream(_segment(0, 0.0, 1.0), epoch=1), 1)
    assert not stream_created(_stream(_segment(0, 0.0, 1.0), sealed=True), 1)


def test_only_the_very_scale_asked_for_counts_as_made():
    split = _stream(
        _segment(0, 0.0, 1.0, successors=("s/t/1", "s/t/2")),
        _segment(1, 0.0, 0.5, predecessors=("s/t/0",)),
        _segment(2, 0.5, 1.0, predecessors=("s/t/0",)),
        epoch=1,
    )
    assert scale_made(split, [0], 2)
    assert not scale_made(split, [0], 3)  # another split than the one asked for
    assert not scale_made(split, [1], 2)  # a segment that is not sealed
    merged = _stream(
        _segment(0, 0.0, 0.5, successors=("s/t/2",)),
        _segment(1, 0.5, 1.0, successors=("s/t/2",)),
        _segment(2, 0.0, 1.0, predecessors=("s/t/0", "s/t/1")),
        epoch=1,
    )
    assert scale_made(merged, [0, 1], 0)
    assert not scale_made(merged, [0], 2)


def test_a_state_counts_written_only_with_the_value_at_the_next_revision():
    assert state_written(StateValue("k", b"v", 4, 0), 3, b"v")
    assert not state_written(StateValue("k", b"w", 4, 0), 3, b"v")
    assert not state_written(StateValue("k", b"v", 5, 0), 3, b"v")


def test_a_state_proves_a_change_unmade_only_at_a_revision_no_later_than_expected():
    assert state_untouched(StateValue("k", b"w", 3, 0), 3)
    assert state_untouched(StateValue("k", b"w", 2, 0), 3)
    assert not state_untouched(StateValue("k", b"w", 5, 0), 3)  # moved on: maybe over it
    assert not state_untouched(StateValue("k", b"", 0, 0), 3)  # gone: maybe after it
