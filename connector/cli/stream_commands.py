"""``tidemarkctl stream``: create, list, describe, write, tail, scale, seal, truncate, delete."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import click

from connector.cli.app import Failure, Settings, Shown, TidemarkctlGroup, failure_of
from connector.cli.params import STREAM_NAME
from connector.cli.scope_commands import names_shown
from connector.cli.tail import EventSeen, tail
from connector.cli.watermark_commands import event_time_text, watermark_text
from connector.client import BytesSerializer, EventWriter, StoreClient, StreamManager
from connector.clock import utc_text
from connector.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    StoreUnavailableError,
    TidemarkError,
)
from connector.model import StreamDescription
from connector.names import SegmentId, StreamId

__all__ = ["stream"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)


def _described(description: StreamDescription, **extra: Any) -> Shown:
    value = asdict(description)
    value["name"] = f"{description.scope}/{description.stream}"
    value.update(extra)
    state = "sealed" if description.sealed else "open"
    lines = [
        f"stream {description.scope}/{description.stream}: epoch {description.epoch}, {state}",
        f"  {'SEGMENT':<24} {'KEY RANGE':<16} {'EPOCH':>5}  {'STATE':<6} PREDECESSORS",
    ]
    for s in description.segments:
        keys = f"[{s.key_low:.3f}, {s.key_high:.3f})"
        before = ",".join(s.predecessors) or "-"
        lines.append(
            f"  {s.segment:<24} {keys:<16} {s.epoch:>5}  {'sealed' if s.sealed else 'open':<6} "
            f"{before}"
        )
    return Shown(value, "\n".join(lines))


@click.group(cls=TidemarkctlGroup)
def stream() -> None:
    """Streams: create, list, describe, write, tail, scale, seal, truncate, delete."""


@stream.command("list")
@click.argument("scope_name", metavar="SCOPE")
@pass_settings
def stream_list(settings: Settings, scope_name: str) -> Shown:
    """Lists the streams of SCOPE, sealed ones too."""
    names = StreamManager(settings.client()).list_streams(scope_name)
    full = [f"{scope_name}/{name}" for name in names]
    return names_shown({"scope": scope_name, "streams": names}, full, "no streams")


@stream.command("create")
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@click.option(
    "--segments",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many segments the stream starts with.",
)
@click.option(
    "--if-not-exists",
    is_flag=True,
    help="An existing stream is not an error (it is described as it is, whatever --segments).",
)
@pass_settings
def stream_create(settings: Settings, name: StreamId, segments: int, if_not_exists: bool) -> Shown:
    """Creates stream SCOPE/STREAM (the scope must exist)."""
    client = settings.client()
    try:
        created = client.create_stream(name.scope, name.stream, segments)
    except AlreadyExistsError:
        if not if_not_exists:
            raise
        return _described(client.describe_stream(name.scope, name.stream), created=False)
    return _described(created, created=True)


def _extent(client: StoreClient, segment: str) -> dict[str, Any]:
    """A segment's readable bytes and events, tail offset and watermarks, as the store has them."""
    info = client.segment_info(segment)
    planned = client.plan_read(segment, info.first_offset)
    return {
        "first_offset": info.first_offset,
        "tail_offset": info.write_offset,
        "bytes": info.write_offset - info.first_offset,
        "events": planned.events,
        "watermark": info.watermark,
        "last_write_time": info.last_write_time,
        "event_time_watermark": info.event_time_watermark,
        "writers": [asdict(w) for w in info.writers],
        "sealed": info.sealed,
    }


def _active_writers(extents: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The writers active on the open segments, with their last assertions (the same on each)."""
    latest: dict[str, dict[str, Any]] = {}
    for extent in extents.values():
        if extent["sealed"]:
            continue
        for writer in extent["writers"]:
            seen = latest.get(writer["writer_id"])
            if seen is None or writer["last_seen"] > seen["last_seen"]:
                latest[writer["writer_id"]] = writer
    return [latest[w] for w in sorted(latest)]


def _writers_text(writers: list[dict[str, Any]]) -> str:
    if not writers:
        return "  no active writer asserts event time"
    lines = [f"  {'WRITER':<36} {'LAST ASSERTION':<24} LAST SEEN"]
    for w in writers:
        lines.append(
            f"  {w['writer_id']:<36} {watermark_text(w['event_time']):<24} "
            f"{utc_text(w['last_seen'])}"
        )
    return "\n".join(lines)


def _sizes_text(stream: str, extents: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"  {'SEGMENT':<24} {'FIRST':>10} {'TAIL':>12} {'BYTES':>12} {'EVENTS':>10}  "
        f"{'WATERMARK':<24} EVENT TIME (WRITERS)"
    ]
    for segment, e in extents.items():
        lines.append(
            f"  {segment:<24} {e['first_offset']:>10} {e['tail_offset']:>12} {e['bytes']:>12} "
            f"{e['events']:>10}  {watermark_text(e['watermark']):<24} "
            f"{event_time_text(e['event_time_watermark'])}"
        )
    events = sum(e["events"] for e in extents.values())
    size = sum(e["bytes"] for e in extents.values())
    lines.append(f"  {stream}: {events} events, {size} bytes readable")
    return "\n".join(lines)


@stream.command("describe")
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@pass_settings
def stream_describe(settings: Settings, name: StreamId) -> Shown:
    """Shows a stream's segments: key ranges, lineage, sizes, tail offsets, watermarks.

    Per segment: its first readable offset (0 unless truncated), its tail
    offset (where the next event goes), the bytes and events between them,
    its watermark and the event-time watermark its writers asserted. Then
    the writers active on the open segments, with their last assertion.
    """
    client = settings.client()
    description = client.describe_stream(name.scope, name.stream)
    extents = {s.segment: _extent(client, s.segment) for s in description.segments}
    writers = _active_writers(extents)
    shown = _described(
        description,
        events=sum(e["events"] for e in extents.values()),
        bytes=sum(e["bytes"] for e in extents.values()),
        writers=writers,
    )
    for segment in shown.value["segments"]:
        segment.update({k: v for k, v in extents[segment["segment"]].items() if k != "sealed"})
    text = f"{shown.text}\n{_sizes_text(str(name), extents)}\n{_writers_text(writers)}"
    return Shown(shown.value, text)


@stream.command("scale")
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@click.option("--split", "split", type=int, metavar="N", help="Split segment number N ...")
@click.option(
    "--into", type=click.IntRange(min=2), default=2, show_default=True, help="... into this many."
)
@click.option(
    "--merge", "merge", type=int, multiple=True, metavar="N", help="Merge these adjacent segments."
)
@pass_settings
def stream_scale(
    settings: Settings, name: StreamId, split: int | None, into: int, merge: tuple[int, ...]
) -> Shown:
    """Splits one segment (--split N --into K) or merges adjacent ones (--merge N --merge M)."""
    if (split is None) == (not merge):
        msg = "give either --split N or two or more --merge N"
        raise click.UsageError(msg)
    manager = StreamManager(settings.client())
    if split is not None:
        return _described(manager.split_segment(str(name.segment(split)), into=into))
    return _described(manager.merge_segments([str(name.segment(n)) for n in merge]))


@stream.command("seal")
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@pass_settings
def stream_seal(settings: Settings, name: StreamId) -> Shown:
    """Seals every open segment: the stream takes no more events."""
    return _described(settings.client().seal_stream(name.scope, name.stream))


@stream.command("delete")
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@click.option("--if-exists", is_flag=True, help="A stream that does not exist is not an error.")
@pass_settings
def stream_delete(settings: Settings, name: StreamId, if_exists: bool) -> Shown:
    """Deletes a sealed stream and its data (seal it first)."""
    try:
        settings.client().delete_stream(name.scope, name.stream)
    except NotFoundError:
        if not if_exists:
            raise
        return Shown({"deleted": str(name), "existed": False}, f"stream {name} does not exist")
    return Shown({"deleted": str(name), "existed": True}, f"stream {name} deleted")


def _cut_entry(_ctx: Any, param: click.Parameter, values: tuple[str, ...]) -> dict[int, int]:
    cut = {}
    for value in values:
        number, sep, offset = value.partition("=")
        if not sep or not number.isdecimal() or not offset.isdecimal():
            msg = f"expected SEGMENT=OFFSET (two numbers), got {value!r}"
            raise click.BadParameter(msg, param=param)
        cut[int(number)] = int(offset)
    return cut


@stream.command("truncate")
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@click.option(
    "--cut",
    multiple=True,
    callback=_cut_entry,
    metavar="SEGMENT=OFFSET",
    help="Truncate segment number SEGMENT before byte OFFSET (an event boundary); repeatable.",
)
@click.option("--at-tail", is_flag=True, help="Truncate everything stored now.")
@pass_settings
def stream_truncate(
    settings: Settings, name: StreamId, cut: dict[int, int], at_tail: bool
) -> Shown:
    """Truncates a stream at a cut: the data before it can no longer be read.

    Sealed segments wholly before the cut lose their data files. Readers
    positioned before the cut fail, naming the first readable offset.
    """
    if bool(cut) == at_tail:
        msg = "give either --cut SEGMENT=OFFSET (repeatable) or --at-tail"
        raise click.UsageError(msg)
    client = settings.client()
    if at_tail:
        described = client.describe_stream(name.scope, name.stream)
        # The newest segments: the open ones, or the last ones of a sealed stream.
        newest = [s for s in described.segments if not s.successors]
        cut = {
            SegmentId.parse(s.segment).number: client.segment_info(s.segment).write_offset
            for s in newest
        }
    result = client.truncate_stream(name.scope, name.stream, cut)
    value = {
        "stream": str(name),
        "cut": {str(n): o for n, o in sorted(cut.items())},
        "removed_segments": list(result.removed_segments),
        "bytes_freed": result.bytes_freed,
    }
    lines = [f"stream {name} truncated at {', '.join(f'{n}={o}' for n, o in cut.items())}"]
    lines += [f"  removed {segment}" for segment in result.removed_segments]
    lines.append(f"  {result.bytes_freed} bytes freed")
    return Shown(value, "\n".join(lines))


@stream.command("tail")
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@click.option("--from-start", is_flag=True, help="Begin at the first event, not at the tail.")
@click.option("--max-events", type=click.IntRange(min=1), help="Stop after this many events.")
@click.option(
    "--duration",
    "duration_s",
    type=click.FloatRange(min=0),
    help="Stop after this many seconds (default: run until Ctrl-C, which exits 0).",
)
@click.option("--no-watermarks", is_flag=True, help="Print events only.")
@pass_settings
def stream_tail(
    settings: Settings,
    name: StreamId,
    from_start: bool,
    max_events: int | None,
    duration_s: float | None,
    no_watermarks: bool,
) -> None:
    """Prints events as they arrive, and each segment's watermark as it rises.

    An event's line: its ingestion time (the store's clock when it stored
    the event), segment@offset, key=ROUTING_KEY (- for none), the event.
    With -o json, one JSON object a line. Ctrl-C stops it (exit 0).
    """
    events = 0
    # Ctrl-C asks the tail to stop after the read in flight (at most a second) instead of
    # raising KeyboardInterrupt inside a gRPC call, after which the process could hang at exit.
    with _ctrl_c_sets() as interrupted:
        for item in tail(
            settings.client(),
            name,
            from_start=from_start,
            timeout_s=duration_s,
            stopped=interrupted.is_set,
        ):
            if isinstance(item, EventSeen):
                events += 1
                payload = item.payload.decode("utf-8", "backslashreplace")
                value = {
                    "kind": "event",
                    "segment": item.segment,
                    "offset": item.offset,
                    "ingestion_time": item.ingestion_time,
                    "routing_key": item.routing_key,
                    "payload": payload,
                }
                key = "-" if item.routing_key is None else item.routing_key
                where = f"{item.segment}@{item.offset}"
                text = f"{utc_text(item.ingestion_time)} {where} key={key} {payload}"
                settings.emit(value, text)
                if max_events is not None and events >= max_events:
                    return
            elif not no_watermarks:
                value = {"kind": "watermark", "segment": item.segment, "watermark": item.watermark}
                settings.emit(value, f"-- watermark {item.segment} {utc_text(item.watermark)}")


@contextlib.contextmanager
def _ctrl_c_sets() -> Iterator[threading.Event]:
    """An event that Ctrl-C (SIGINT) sets while the block runs, instead of raising.

    Off the main thread (where Python takes no signal handlers) the event is
    only set by whoever holds it.
    """
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


def _routing_key(line: bytes, number: int, key_field: str | None, key: str | None) -> str | None:
    """The routing key of input line ``number``: the fixed one, its JSON field's, or none."""
    if key_field is None:
        return key
    shown = line[:80].decode("utf-8", "backslashreplace")
    try:
        value = json.loads(line)
    except ValueError:
        msg = f"line {number} is not JSON, and --key-field reads a JSON object: {shown!r}"
        raise InvalidArgumentError(msg) from None
    if not isinstance(value, dict):
        msg = f"line {number} is not a JSON object, and --key-field reads one: {shown!r}"
        raise InvalidArgumentError(msg)
    field = value.get(key_field)
    if isinstance(field, bool) or not isinstance(field, str | int):
        msg = (
            f"line {number} has no string or integer field {key_field!r} for --key-field: {shown!r}"
        )
        raise InvalidArgumentError(msg)
    return str(field)


@contextlib.contextmanager
def _refusal_ends_the_write(
    settings: Settings, writer: EventWriter[bytes], handed: int
) -> Iterator[None]:
    """Ends the command when the store refuses a batch, saying how many events were stored.

    ``handed`` is how many events were given to ``writer`` by the end of the
    block. The writer's own message tells a program what to do with the
    events it keeps queued; here they are dropped, and the message is the
    store's refusal with the count.
    """
    try:
        yield
    except TidemarkError as error:
        if isinstance(error, StoreUnavailableError):
            raise
        not_stored = writer.discard_pending()
        refusal = error.__cause__ if isinstance(error.__cause__, TidemarkError) else error
        failure = failure_of(refusal, settings.uri)
        msg = f"{failure.message} ({handed - not_stored} events before it were stored)"
        raise Failure(msg, failure.exit_code, failure.kind) from None


@stream.command("write")
@click.argument("name", type=STREAM_NAME, metavar="SCOPE/STREAM")
@click.option(
    "--key-field",
    metavar="FIELD",
    help="Each line is a JSON object; its FIELD (a string or integer) is the routing key.",
)
@click.option("--key", metavar="KEY", help="One routing key for every line.")
@pass_settings
def stream_write(
    settings: Settings, name: StreamId, key_field: str | None, key: str | None
) -> Shown:
    """Writes each line of standard input as one event (empty lines are skipped).

    Events of one routing key keep their order; without --key-field or
    --key, lines have no key and no order between them is kept. Lines are
    stored as they arrive, a batch whenever the input pauses, durably before
    the next is read. A bad line stops the command (exit 2); the lines
    before it are stored, and the error says how many.
    """
    if key_field is not None and key is not None:
        msg = "give --key-field FIELD or --key KEY, not both"
        raise click.UsageError(msg)
    source = sys.stdin.buffer
    handed = 0  # events given to the writer: once a flush returns, every one is stored
    number = 0
    pending = b""
    # Not closed on an error: closing flushes, and the error already says what is not stored.
    writer = EventWriter(settings.client(), name, BytesSerializer())
    while True:
        chunk = source.read1(1 << 16)  # what is there now, waiting only for the first byte
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop() if chunk else b""
        for line in lines:
            number += 1
            event = line.removesuffix(b"\r")
            if not event:
                continue
            try:
                routing_key = _routing_key(event, number, key_field, key)
            except InvalidArgumentError as error:
                with _refusal_ends_the_write(settings, writer, handed):
                    writer.flush()
                msg = f"{error} ({handed} events before it were stored)"
                raise Failure(msg, 2, "InvalidArgumentError") from None
            handed += 1
            with _refusal_ends_the_write(settings, writer, handed):
                writer.write_event(event, routing_key)
        with _refusal_ends_the_write(settings, writer, handed):
            writer.flush()
        if not chunk:
            break
    writer.close()
    return Shown({"stream": str(name), "events": handed}, f"wrote {handed} events to {name}")
