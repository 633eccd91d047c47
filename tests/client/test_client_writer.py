"""The client's EventWriter and serializers against a real store server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from connector.client import (
    BytesSerializer,
    EventWriter,
    JsonSerializer,
    StoreClient,
    StreamManager,
    StringSerializer,
    WriterConfig,
    key_position,
    serializer_named,
)
from connector.errors import InvalidArgumentError, StoreUnavailableError, TidemarkError
from connector.model import StreamDescription
from connector.server import StoreServer
from tests.store import payloads, read_frames

pytestmark = pytest.mark.storages("file", "jetstream")


def _stream(client: StoreClient, segments: int) -> StreamDescription:
    manager = StreamManager(client)
    manager.create_scope("sc", exist_ok=True)
    return manager.create_stream("sc", "st", segment_count=segments)


def _events(client: StoreClient, segment: str) -> list[dict[str, object]]:
    return [json.loads(p) for p in payloads(client, segment)]


# --- routing and batching ---------------------------------------------------


def test_routing_key_positions_are_pinned_so_every_process_agrees() -> None:
    assert key_position("sensor-A") == 0.7593595449453315
    assert key_position("") == 0.8931675160897388
    assert 0.0 <= key_position(None) < 1.0


def test_writer_sends_every_event_of_a_key_to_the_segment_owning_it_in_order(
    store_client: StoreClient,
) -> None:
    description = _stream(store_client, 4)
    keys = [f"sensor-{n}" for n in range(16)]
    config = WriterConfig(max_batch_events=7)
    with EventWriter(store_client, "sc/st", JsonSerializer(), config=config) as writer:
        for seq in range(10):
            for key in keys:
                writer.write_event({"key": key, "seq": seq}, routing_key=key)

    seen: dict[str, list[int]] = {}
    for segment in description.segments:
        for event in _events(store_client, segment.segment):
            assert segment.owns(key_position(event["key"])), f"{event} in {segment.segment}"
            seen.setdefault(event["key"], []).append(event["seq"])
    assert seen == {key: list(range(10)) for key in keys}
    assert sum(1 for s in description.segments if payloads(store_client, s.segment)) >= 3


def test_writer_sends_a_segment_s_batch_once_it_holds_max_batch_events(
    store_client: StoreClient,
) -> None:
    [segment] = (s.segment for s in _stream(store_client, 1).segments)
    config = WriterConfig(max_batch_events=10)
    writer = EventWriter(store_client, "sc/st", BytesSerializer(), config=config)
    for n in range(25):
        writer.write_event(b"e%02d" % n, routing_key="k")

    assert payloads(store_client, segment) == [b"e%02d" % n for n in range(20)]
    writer.flush()
    frames = read_frames(store_client, segment)
    assert [f.payload for f in frames] == [b"e%02d" % n for n in range(25)]
    batch_times = sorted({f.ingestion_time for f in frames})  # one per append
    assert [sum(f.ingestion_time == t for f in frames) for t in batch_times] == [10, 10, 5]
    writer.close()


def test_writer_sends_a_segment_s_batch_once_it_holds_max_batch_bytes(
    store_client: StoreClient,
) -> None:
    [segment] = (s.segment for s in _stream(store_client, 1).segments)
    config = WriterConfig(max_batch_bytes=100)
    writer = EventWriter(store_client, "sc/st", BytesSerializer(), config=config)
    for n in range(9):
        writer.write_event(bytes([n]) * 30, routing_key="k")

    assert len(payloads(store_client, segment)) == 8  # 4 events reach 120 >= 100 bytes, twice
    writer.close()
    assert len(payloads(store_client, segment)) == 9


def test_events_wait_for_flush_and_the_writer_refuses_events_once_closed(
    store_client: StoreClient,
) -> None:
    [segment] = (s.segment for s in _stream(store_client, 1).segments)
    writer = EventWriter(store_client, "sc/st", StringSerializer(), writer_id="task-7")
    writer.write_event("a", routing_key="k")
    writer.write_event("b", routing_key="k")
    assert store_client.segment_info(segment).write_offset == 0

    writer.flush()
    assert payloads(store_client, segment) == [b"a", b"b"]
    writer.close()
    writer.close()  # harmless
    with pytest.raises(TidemarkError, match="'task-7' is closed"):
        writer.write_event("c", routing_key="k")
    assert payloads(store_client, segment) == [b"a", b"b"]


def test_a_flush_that_failed_keeps_its_events_and_a_later_flush_stores_them(
    start_store: Callable[..., StoreServer], wait_until: Callable[..., object]
) -> None:
    server = start_store()
    with StoreClient(server.uri) as setup:  # patient: a loaded machine may take a while to connect
        [segment] = (s.segment for s in _stream(setup, 1).segments)
    client = StoreClient(server.uri, retry_timeout_s=0.2)  # gives up soon once the store is gone
    writer = EventWriter(client, "sc/st", StringSerializer())
    for event in ("a", "b", "c"):
        writer.write_event(event, routing_key="k")
    server.stop()

    with pytest.raises(StoreUnavailableError):
        writer.flush()
    again = start_store(listen=server.address)  # the store is back where the writer expects it

    def flushed() -> bool:
        try:
            writer.flush()
        except StoreUnavailableError:  # the channel may still be backing off
            return False
        return True

    wait_until(flushed, timeout=15.0, what="a flush to reach the restarted store")
    with StoreClient(again.uri, retry_timeout_s=5.0) as check:
        assert payloads(check, segment) == [b"a", b"b", b"c"]
        writer.write_event("d", routing_key="k")
        writer.close()
        assert payloads(check, segment) == [b"a", b"b", b"c", b"d"]
    client.close()


def test_a_new_writer_with_an_old_writer_s_id_skips_the_events_already_stored(
    store_client: StoreClient,
) -> None:
    [segment] = (s.segment for s in _stream(store_client, 1).segments)
    with EventWriter(store_client, "sc/st", StringSerializer(), writer_id="task-1") as first:
        for n in range(10):
            first.write_event(f"e{n}", routing_key="k")
    with EventWriter(store_client, "sc/st", StringSerializer(), writer_id="task-1") as retry:
        for n in range(15):  # the retried task writes the same events, then goes further
            retry.write_event(f"e{n}", routing_key="k")

    assert payloads(store_client, segment) == [f"e{n}".encode() for n in range(15)]


@pytest.mark.parametrize("config", [(0, 1), (1, 0), (-5, 10)])
def test_writer_config_rejects_limits_that_are_not_positive(config: tuple[int, int]) -> None:
    expected = f"got {config[0]!r} bytes, {config[1]!r} events"
    with pytest.raises(InvalidArgumentError, match=expected):
        WriterConfig(*config)


# --- scaling while writing --------------------------------------------------


def test_no_event_is_lost_and_key_order_holds_across_a_split_and_a_merge_during_writes(
    store_client: StoreClient, wait_until: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stream(store_client, 1)
    reroutes: list[list[str]] = []  # the segments the writer knew when it found one sealed
    reroute = EventWriter._reroute_after_scaling

    def counting_reroute(self: EventWriter[object], batch: object) -> None:
        reroutes.append([s.segment for s in self._segments])
        reroute(self, batch)

    monkeypatch.setattr(EventWriter, "_reroute_after_scaling", counting_reroute)
    manager = StreamManager(store_client)
    keys = [f"key-{n}" for n in range(12)]
    written = 0
    stop_at: list[int] = []  # set once both scalings are done: keep writing until then + 300
    failure: list[BaseException] = []

    def write() -> None:
        nonlocal written
        config = WriterConfig(max_batch_events=7)
        writer = EventWriter(store_client, "sc/st", JsonSerializer(), config=config)
        try:
            while not stop_at or written < stop_at[0]:
                key = keys[written % len(keys)]
                writer.write_event({"key": key, "seq": written // len(keys)}, routing_key=key)
                written += 1
            writer.close()
        except BaseException as error:  # surfaced by the assertion below
            failure.append(error)

    thread = threading.Thread(target=write, name="scaling-writer")
    thread.start()
    wait_until(lambda: written >= 300, timeout=20.0, what="300 events before the split")
    manager.split_segment("sc", "st", 0, into=2)
    at_split = written
    wait_until(lambda: written >= at_split + 300, timeout=20.0, what="300 events after the split")
    description = manager.merge_segments("sc", "st", [1, 2])
    stop_at.append(written + 300)
    wait_until(lambda: not thread.is_alive(), timeout=30.0, what="the writer to finish")
    assert not failure, failure

    assert [s.segment for s in description.open_segments] == ["sc/st/3"]
    assert reroutes == [["sc/st/0"], ["sc/st/1", "sc/st/2"]]  # once per scaling, mid-stream
    # Readers finish predecessors before successors: 0, then 1 and 2, then 3.
    order = [["sc/st/0"], ["sc/st/1", "sc/st/2"], ["sc/st/3"]]
    per_key: dict[str, list[int]] = {key: [] for key in keys}
    for epoch in order:
        for segment in epoch:
            events = _events(store_client, segment)
            assert events, f"{segment} got no events: the scaling did not happen mid-stream"
            for event in events:
                assert description.segment(segment).owns(key_position(event["key"]))
                per_key[event["key"]].append(event["seq"])
    assert sum(len(seqs) for seqs in per_key.values()) == written
    for key, seqs in per_key.items():
        assert seqs == list(range(len(seqs))), f"{key} out of order or with gaps"


# --- serializers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("serializer", "value"),
    [
        (JsonSerializer(), {"sensor": "A", "values": [1, 2.5, None, True], "note": "ünï ✓"}),
        (JsonSerializer(), [0, "", {}]),
        (StringSerializer(), "héllo ✓ \x00 end"),
        (StringSerializer(), ""),
        (BytesSerializer(), b"\x00\xff\x10binary"),
        (BytesSerializer(), b""),
    ],
)
def test_serializers_round_trip_through_the_store(
    store_client: StoreClient, serializer: object, value: object
) -> None:
    [segment] = (s.segment for s in _stream(store_client, 1).segments)
    with EventWriter(store_client, "sc/st", serializer) as writer:
        writer.write_event(value, routing_key="k")

    [stored] = payloads(store_client, segment)
    assert serializer.deserialize(stored) == value


@pytest.mark.parametrize(
    ("serializer", "value", "message"),
    [
        (BytesSerializer(), "text", "BytesSerializer takes bytes, got str: 'text'"),
        (BytesSerializer(), 7, "BytesSerializer takes bytes, got int: 7"),
        (StringSerializer(), b"raw", "StringSerializer takes str, got bytes: b'raw'"),
        (StringSerializer(), None, "StringSerializer takes str, got NoneType: None"),
        (JsonSerializer(), {1, 2}, "JsonSerializer cannot encode {1, 2}"),
        (JsonSerializer(), b"raw", "JsonSerializer cannot encode b'raw'"),
    ],
)
def test_serializers_reject_wrong_types_naming_the_value_and_the_writer_sends_nothing(
    store_client: StoreClient, serializer: object, value: object, message: str
) -> None:
    [segment] = (s.segment for s in _stream(store_client, 1).segments)
    with pytest.raises(InvalidArgumentError) as caught:
        serializer.serialize(value)
    assert message in str(caught.value)

    with EventWriter(store_client, "sc/st", serializer) as writer:
        with pytest.raises(InvalidArgumentError):
            writer.write_event(value, routing_key="k")
    assert store_client.segment_info(segment).write_offset == 0


def test_serializers_are_found_by_name_and_an_unknown_name_is_rejected() -> None:
    assert [type(serializer_named(n)) for n in ("bytes", "string", "json")] == [
        BytesSerializer,
        StringSerializer,
        JsonSerializer,
    ]
    expected = r"unknown serializer 'xml': use one of \['bytes', 'json', 'string'\]"
    with pytest.raises(InvalidArgumentError, match=expected):
        serializer_named("xml")
