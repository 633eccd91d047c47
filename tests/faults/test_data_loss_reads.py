"""A damaged event under a running store: DATA_LOSS at the client, a metric, a health state.

On the file store a byte of a segment's data file is flipped; on JetStream
a byte of an append's payload as it reaches the server (its payload cache:
what a replica's corrupt answer would put there). A read then serves every
event before the damaged one, and the read at it fails with ``DATA_LOSS``
(:class:`DataLossError`, naming the segment, the offset and where the next
append starts), never retried by the client; the server counts it
(``tidemark_data_loss_reads_total``, ``tidemark_damaged_segments``), its
health service answers NOT_SERVING for :data:`DATA_SERVICE` while the store
still takes writes, and a reader of a reader group fails with the same
error at once rather than retrying.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
import pytest
from click.testing import CliRunner
from grpc_health.v1 import health_pb2

from connector._wire import DATA_SERVICE
from connector.cli import cli
from connector.cli.app import EXIT_DATA_LOSS
from connector.client import StoreClient, StringSerializer
from connector.errors import DataLossError
from connector.framing import iter_frames
from connector.reader import ReaderGroupManager
from connector.server import StoreServer
from connector.store import StorageConfig
from tests.conftest import new_stream_in, wait_until
from tests.probes import flip_stored_bit, health_of, scrape

pytestmark = pytest.mark.storages("file", "jetstream")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def test_a_damaged_event_is_data_loss_at_the_client_a_metric_and_a_health_state(
    storage_config: Callable[..., StorageConfig],
) -> None:
    server = StoreServer(storage_config(), metrics_listen="127.0.0.1:0").start()
    channel = grpc.insecure_channel(server.address)
    try:
        with StoreClient(server.uri, retry_timeout_s=2.0) as client:
            stream = new_stream_in(client)
            segment = f"{stream}/0"
            for number in range(4):
                events = [f"{number}-{e}".encode() for e in range(5)]
                client.append(segment, "w", number * 5, events)
            frames = list(iter_frames(client.read(segment, 0, 1 << 20).data))
            damaged = frames[12]  # the third event of the third append
            flip_stored_bit(server, segment, damaged.offset + 20)
            wait_until(lambda: health_of(channel, DATA_SERVICE) == SERVING, what="intact")
            assert CliRunner().invoke(cli, ["--uri", server.uri, "health"]).exit_code == 0

            served = client.read(segment, 0, 1 << 20)
            assert served.next_offset == damaged.offset
            assert [f.payload for f in iter_frames(served.data)] == [f.payload for f in frames[:12]]
            started = time.monotonic()
            with pytest.raises(DataLossError) as loss:
                client.read(segment, damaged.offset, 1 << 20)
            assert time.monotonic() - started < 1.5, "a DATA_LOSS was retried"
            assert (loss.value.segment, loss.value.offset) == (segment, damaged.offset)
            assert loss.value.next_offset == frames[15].offset  # the fourth append
            assert f"data loss in segment {segment!r} at offset {damaged.offset}" in str(loss.value)
            rest = client.read(segment, loss.value.next_offset, 1 << 20)
            assert [f.payload for f in iter_frames(rest.data)] == [f.payload for f in frames[15:]]

            samples = scrape(server.metrics_address)
            assert samples[("tidemark_data_loss_reads_total", (("stream", stream),))] >= 1
            assert samples[("tidemark_damaged_segments", ())] == 1
            wait_until(lambda: health_of(channel, DATA_SERVICE) == NOT_SERVING, what="damaged")
            assert health_of(channel) == SERVING  # it still takes writes
            said = CliRunner().invoke(cli, ["--uri", server.uri, "health"])
            assert said.exit_code == EXIT_DATA_LOSS and "damaged data" in said.output
            assert client.append(segment, "w", 20, [b"after"]).appended == 1

            # A reader reads up to the damage, then fails with it at once, every time.
            group = ReaderGroupManager(client).create_reader_group(*stream.split("/"), [stream])
            with group.create_reader("r", StringSerializer()) as reader:
                read = []
                with pytest.raises(DataLossError, match=f"at offset {damaged.offset}"):
                    while len(read) < 30:
                        event = reader.read_next_event(timeout_ms=5_000)
                        assert event is not None, "the reader waited instead of failing"
                        if event.is_event:
                            read.append(event.event)
                assert read == [f.payload.decode() for f in frames[:12]]
                with pytest.raises(DataLossError):
                    reader.read_next_event(timeout_ms=5_000)
    finally:
        channel.close()
        server.stop()
