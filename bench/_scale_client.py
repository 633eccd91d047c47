"""A process tailing many segments, keys or subjects for the scale benchmark, saying what it sees.

    python -m bench._scale_client tidemark --uri URI --group G --streams scale/s0,scale/s1
    python -m bench._scale_client redis --port PORT --keys N
    python -m bench._scale_client nats --urls URLS --stream S --subject-prefix P

Not a benchmark itself: :mod:`bench.scale_bench` starts it, so that its CPU
is its own. It writes lines to stdout: ``ready`` once it is tailing;
``p ID WALL`` for each probe event (a payload ``p:ID``) when it arrives,
``WALL`` being ``time.time()``; ``w WATERMARK WALL`` for each watermark a
Tidemark reader returns; and on SIGTERM ``n COUNT``, the other events it
read, before it exits.

- ``tidemark``: a reader group over the streams from their tails, 2 ``EventReader`` in it
  (one thread each, their own connection), ingestion-time domain, the
  reader's defaults otherwise, ``read_next_event(500)`` in a loop;
- ``redis``: ``XREAD BLOCK 500`` over ``k0`` ... ``kN-1``, from their start,
  following each key's last id;
- ``nats``: a pull consumer (no acknowledgements) on the JetStream stream,
  ``fetch`` of up to 256 messages waiting at most 500 ms, in a loop.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["main"]

PROBE = b"p:"
WAIT_MS = 500


class _Out:
    """Lines to stdout from several threads, and the count of events that were not probes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.others = 0

    def line(self, text: str) -> None:
        with self._lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def event(self, payload: bytes) -> None:
        if payload.startswith(PROBE):
            self.line(f"p {payload[len(PROBE) :].decode()} {time.time()}")
        else:
            with self._lock:
                self.others += 1


def _tidemark(args: argparse.Namespace, out: _Out, stopping: threading.Event) -> None:
    from connector import BytesSerializer, StoreClient
    from connector.reader import EventReader, ReaderConfig, ReaderGroupManager, TimeDomain

    streams = args.streams.split(",")
    config = ReaderConfig(time_domain=TimeDomain.INGESTION_TIME)
    with StoreClient(args.uri, call_timeout_s=120) as client:
        scope = streams[0].partition("/")[0]
        manager = ReaderGroupManager(client)
        group = manager.create_reader_group(scope, args.group, streams, start="latest")
        started = threading.Barrier(args.readers + 1)

        def read(number: int) -> None:
            try:
                with StoreClient(args.uri, call_timeout_s=120) as own:
                    mine = ReaderGroupManager(own).get_reader_group(scope, args.group)
                    reader = mine.create_reader(f"r{number}", BytesSerializer(), config)
                    try:
                        tail(reader)
                    finally:
                        reader.close()
            except BaseException:
                started.abort()  # the process says so in its log, and never ``ready``
                raise

        def tail(reader: EventReader[bytes]) -> None:
            first = True
            while not stopping.is_set():
                read = reader.read_next_event(WAIT_MS)
                if first:
                    first = False
                    started.wait()
                if read is None:
                    continue
                if read.watermark is not None:
                    out.line(f"w {read.watermark} {time.time()}")
                elif read.event is not None:
                    out.event(read.event)

        threads = [
            threading.Thread(target=read, args=(n,), name=f"reader-{n}", daemon=True)
            for n in range(args.readers)
        ]
        for thread in threads:
            thread.start()
        try:
            started.wait()
        except threading.BrokenBarrierError:
            return
        out.line("ready")
        stopping.wait()
        for thread in threads:
            thread.join(30)
        del group


def _redis(args: argparse.Namespace, out: _Out, stopping: threading.Event) -> None:
    import redis

    with redis.Redis(host="127.0.0.1", port=args.port, socket_timeout=60) as client:
        last = {f"k{n}": "0-0" for n in range(args.keys)}
        out.line("ready")
        while not stopping.is_set():
            for key, entries in client.xread(last, count=256, block=WAIT_MS) or ():
                for entry_id, fields in entries:
                    last[key.decode()] = entry_id.decode()
                    out.event(fields.get(b"e", b""))


def _nats(args: argparse.Namespace, out: _Out, stopping: threading.Event) -> None:
    import nats
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    async def run() -> None:
        connection = await nats.connect(args.urls.split(","))
        try:
            js = connection.jetstream()
            config = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
            subscription = await js.pull_subscribe(
                f"{args.subject_prefix}.>", durable="scale", stream=args.stream, config=config
            )
            out.line("ready")
            while not stopping.is_set():
                try:
                    messages = await subscription.fetch(256, timeout=WAIT_MS / 1000)
                except (TimeoutError, NatsTimeout):
                    # nats-py raises either when a wait ends with no message (its own
                    # while it waits for the first, asyncio's when the pull itself ends).
                    continue
                for message in messages:
                    out.event(message.data)
        finally:
            await connection.close()

    asyncio.run(run())


_KINDS: dict[str, Callable[[argparse.Namespace, _Out, threading.Event], None]] = {
    "tidemark": _tidemark,
    "redis": _redis,
    "nats": _nats,
}


def main(argv: list[str] | None = None) -> int:
    """Tails until SIGTERM; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench._scale_client")
    parser.add_argument("kind", choices=sorted(_KINDS))
    parser.add_argument("--uri")
    parser.add_argument("--group", default="scale")
    parser.add_argument("--streams")
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--port", type=int)
    parser.add_argument("--keys", type=int)
    parser.add_argument("--urls")
    parser.add_argument("--stream")
    parser.add_argument("--subject-prefix")
    args = parser.parse_args(argv)
    out = _Out()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    worker = threading.Thread(
        target=_KINDS[args.kind], args=(args, out, stopping), name=args.kind, daemon=True
    )
    worker.start()
    while worker.is_alive() and not stopping.wait(0.2):
        pass
    worker.join(60)
    out.line(f"n {out.others}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
