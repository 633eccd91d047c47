"""The ``tidemarkctl`` command: manage and inspect a store from a shell.

    tidemarkctl --uri 'tidemark://host:7070?token_file=/etc/tidemark/token' stream describe s/t

Human output by default, ``--json`` for scripts (one JSON document, or one
per line for ``stream tail``). Errors are one line on stderr, naming the bad
value. Exit codes: 0 done; 1 another error; 2 a bad command line or value;
3 not found; 4 already exists; 5 refused by the store's state (sealed, busy,
out of space); 6 the store is unreachable; 7 the token is missing or lacks a
right.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, NoReturn

import click

from connector.cli.tail import EventSeen, tail
from connector.cli.watermarks import WatermarkReport, watermarks
from connector.client import StoreClient, StreamManager
from connector.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    StoreUnavailableError,
    TidemarkError,
    UnauthenticatedError,
)
from connector.model import StreamDescription
from connector.names import SegmentId, StreamId
from connector.reader.events import END_OF_TIME
from connector.reader.group import ReaderGroupManager
from connector.reader.group_state import group_watermark

__all__ = ["EXIT_CODES", "cli", "main"]

#: The exit code of each kind of error (the first that matches).
EXIT_CODES: list[tuple[type[TidemarkError], int]] = [
    (InvalidArgumentError, 2),
    (NotFoundError, 3),
    (AlreadyExistsError, 4),
    (FailedPreconditionError, 5),
    (ResourceExhaustedError, 5),
    (StoreUnavailableError, 6),
    (UnauthenticatedError, 7),
    (PermissionDeniedError, 7),
]

DEFAULT_URI = "tidemark://127.0.0.1:7070"


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"tidemarkctl: error: {message}", err=True)
    sys.exit(code)


@contextmanager
def _errors_as_exit_codes(uri: str | None = None) -> Iterator[None]:
    try:
        yield
    except TidemarkError as error:
        code = next((c for t, c in EXIT_CODES if isinstance(error, t)), 1)
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if isinstance(error, StoreUnavailableError) and uri is not None:
            message = f"store {uri.partition('?')[0]!r} unavailable: {message}"
        _fail(message, code)


class _Context:
    def __init__(self, uri: str, as_json: bool, timeout_s: float):
        self.uri = uri
        self.as_json = as_json
        self.timeout_s = timeout_s
        self._client: StoreClient | None = None

    def client(self) -> StoreClient:
        if self._client is None:
            self._client = StoreClient(
                self.uri, retry_timeout_s=self.timeout_s, call_timeout_s=self.timeout_s
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def emit(self, value: Any, human: Callable[[], None]) -> None:
        if self.as_json:
            click.echo(json.dumps(value, sort_keys=True))
        else:
            human()


pass_context = click.make_pass_decorator(_Context)


def _time(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _stream_id(_ctx: Any, param: click.Parameter, value: str) -> StreamId:
    try:
        return StreamId.parse(value)
    except InvalidArgumentError as error:
        raise click.BadParameter(str(error), param=param) from None


def _scoped(_ctx: Any, param: click.Parameter, value: str) -> tuple[str, str]:
    scope, sep, name = value.partition("/")
    if not sep or not scope or not name or "/" in name:
        msg = f"expected 'scope/name', got {value!r}"
        raise click.BadParameter(msg, param=param)
    return scope, name


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--uri",
    envvar="TIDEMARK_URI",
    default=DEFAULT_URI,
    show_default=True,
    help="The store; credentials in its query: ?token_file=...&tls_ca_file=...",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to keep trying an unreachable store (and per call).",
)
@click.pass_context
def cli(ctx: click.Context, uri: str, as_json: bool, timeout_s: float) -> None:
    """Manage and inspect a Tidemark store."""
    with _errors_as_exit_codes(uri):
        context = _Context(uri, as_json, timeout_s)
        context.client()  # a bad URI is an error now, naming it
    ctx.obj = context
    ctx.call_on_close(context.close)


# --- scopes ------------------------------------------------------------------


@cli.group()
def scope() -> None:
    """Scopes: the namespaces streams live in."""


@scope.command("create")
@click.argument("name")
@click.option("--exist-ok", is_flag=True, help="An existing scope is not an error.")
@pass_context
def scope_create(context: _Context, name: str, exist_ok: bool) -> None:
    """Creates scope NAME."""
    with _errors_as_exit_codes(context.uri):
        StreamManager(context.client()).create_scope(name, exist_ok=exist_ok)
    context.emit({"scope": name}, lambda: click.echo(f"scope {name} created"))


@scope.command("list")
@pass_context
def scope_list(context: _Context) -> None:
    """Lists every scope (needs read on every scope)."""
    with _errors_as_exit_codes(context.uri):
        names = StreamManager(context.client()).list_scopes()
    context.emit({"scopes": names}, lambda: _print_names(names, "no scopes"))


def _print_names(names: list[str], empty: str) -> None:
    for name in names:
        click.echo(name)
    if not names:
        click.echo(f"({empty})", err=True)


# --- streams -----------------------------------------------------------------


def _describe(description: StreamDescription) -> dict[str, Any]:
    value = asdict(description)
    value["name"] = f"{description.scope}/{description.stream}"
    return value


def _print_stream(description: StreamDescription) -> None:
    state = "sealed" if description.sealed else "open"
    click.echo(
        f"stream {description.scope}/{description.stream}: epoch {description.epoch}, {state}"
    )
    click.echo(f"  {'SEGMENT':<24} {'KEY RANGE':<16} {'EPOCH':>5}  {'STATE':<6} PREDECESSORS")
    for s in description.segments:
        keys = f"[{s.key_low:.3f}, {s.key_high:.3f})"
        state = "sealed" if s.sealed else "open"
        before = ",".join(s.predecessors) or "-"
        click.echo(f"  {s.segment:<24} {keys:<16} {s.epoch:>5}  {state:<6} {before}")


@cli.group()
def stream() -> None:
    """Streams: create, list, describe, scale, seal, truncate, delete, tail."""


@stream.command("list")
@click.argument("scope_name", metavar="SCOPE")
@pass_context
def stream_list(context: _Context, scope_name: str) -> None:
    """Lists the streams of SCOPE, sealed ones too."""
    with _errors_as_exit_codes(context.uri):
        names = StreamManager(context.client()).list_streams(scope_name)
    full = [f"{scope_name}/{name}" for name in names]
    context.emit({"scope": scope_name, "streams": names}, lambda: _print_names(full, "no streams"))


@stream.command("create")
@click.argument("name", callback=_stream_id, metavar="SCOPE/STREAM")
@click.option(
    "--segments",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many segments the stream starts with.",
)
@pass_context
def stream_create(context: _Context, name: StreamId, segments: int) -> None:
    """Creates stream SCOPE/STREAM (the scope must exist)."""
    with _errors_as_exit_codes(context.uri):
        created = context.client().create_stream(name.scope, name.stream, segments)
    context.emit(_describe(created), lambda: _print_stream(created))


@stream.command("describe")
@click.argument("name", callback=_stream_id, metavar="SCOPE/STREAM")
@pass_context
def stream_describe(context: _Context, name: StreamId) -> None:
    """Shows a stream's segments, their key ranges and lineage."""
    with _errors_as_exit_codes(context.uri):
        found = context.client().describe_stream(name.scope, name.stream)
    context.emit(_describe(found), lambda: _print_stream(found))


@stream.command("scale")
@click.argument("name", callback=_stream_id, metavar="SCOPE/STREAM")
@click.option("--split", "split", type=int, metavar="N", help="Split segment number N ...")
@click.option(
    "--into", type=click.IntRange(min=2), default=2, show_default=True, help="... into this many."
)
@click.option(
    "--merge", "merge", type=int, multiple=True, metavar="N", help="Merge these adjacent segments."
)
@pass_context
def stream_scale(
    context: _Context, name: StreamId, split: int | None, into: int, merge: tuple[int, ...]
) -> None:
    """Splits one segment (--split N --into K) or merges adjacent ones (--merge N --merge M)."""
    if (split is None) == (not merge):
        msg = "give either --split N or two or more --merge N"
        raise click.UsageError(msg)
    manager = StreamManager(context.client())
    with _errors_as_exit_codes(context.uri):
        if split is not None:
            scaled = manager.split_segment(str(name.segment(split)), into=into)
        else:
            scaled = manager.merge_segments([str(name.segment(n)) for n in merge])
    context.emit(_describe(scaled), lambda: _print_stream(scaled))


@stream.command("seal")
@click.argument("name", callback=_stream_id, metavar="SCOPE/STREAM")
@pass_context
def stream_seal(context: _Context, name: StreamId) -> None:
    """Seals every open segment: the stream takes no more events."""
    with _errors_as_exit_codes(context.uri):
        sealed = context.client().seal_stream(name.scope, name.stream)
    context.emit(_describe(sealed), lambda: _print_stream(sealed))


@stream.command("delete")
@click.argument("name", callback=_stream_id, metavar="SCOPE/STREAM")
@pass_context
def stream_delete(context: _Context, name: StreamId) -> None:
    """Deletes a sealed stream and its data (seal it first)."""
    with _errors_as_exit_codes(context.uri):
        context.client().delete_stream(name.scope, name.stream)
    context.emit({"deleted": str(name)}, lambda: click.echo(f"stream {name} deleted"))


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
@click.argument("name", callback=_stream_id, metavar="SCOPE/STREAM")
@click.option(
    "--cut",
    multiple=True,
    callback=_cut_entry,
    metavar="SEGMENT=OFFSET",
    help="Truncate segment number SEGMENT before byte OFFSET (an event boundary); repeatable.",
)
@click.option("--at-tail", is_flag=True, help="Truncate everything stored now.")
@pass_context
def stream_truncate(context: _Context, name: StreamId, cut: dict[int, int], at_tail: bool) -> None:
    """Truncates a stream at a cut: the data before it can no longer be read.

    Sealed segments wholly before the cut lose their data files. Readers
    positioned before the cut fail, naming the first readable offset.
    """
    if bool(cut) == at_tail:
        _fail("give either --cut SEGMENT=OFFSET (repeatable) or --at-tail", 2)
    with _errors_as_exit_codes(context.uri):
        client = context.client()
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

    def human() -> None:
        click.echo(f"stream {name} truncated at {', '.join(f'{n}={o}' for n, o in cut.items())}")
        for segment in result.removed_segments:
            click.echo(f"  removed {segment}")
        click.echo(f"  {result.bytes_freed} bytes freed")

    context.emit(value, human)


@stream.command("tail")
@click.argument("name", callback=_stream_id, metavar="SCOPE/STREAM")
@click.option("--from-start", is_flag=True, help="Begin at the first event, not at the tail.")
@click.option("--max-events", type=click.IntRange(min=1), help="Stop after this many events.")
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0),
    help="Stop after this many seconds (default: run until interrupted).",
)
@click.option("--no-watermarks", is_flag=True, help="Print events only.")
@pass_context
def stream_tail(
    context: _Context,
    name: StreamId,
    from_start: bool,
    max_events: int | None,
    timeout_s: float | None,
    no_watermarks: bool,
) -> None:
    """Prints events as they arrive, and each segment's watermark as it rises.

    Times are ingestion times (the store's clock when it stored the event).
    """
    events = 0
    with _errors_as_exit_codes(context.uri):
        for item in tail(context.client(), name, from_start=from_start, timeout_s=timeout_s):
            if isinstance(item, EventSeen):
                events += 1
                payload = item.payload.decode("utf-8", "backslashreplace")
                context.emit(
                    {
                        "kind": "event",
                        "segment": item.segment,
                        "offset": item.offset,
                        "ingestion_time": item.ingestion_time,
                        "routing_key": item.routing_key,
                        "payload": payload,
                    },
                    lambda item=item, payload=payload: click.echo(
                        f"{_time(item.ingestion_time)} {item.segment}@{item.offset} {payload}"
                    ),
                )
                if max_events is not None and events >= max_events:
                    return
            elif not no_watermarks:
                context.emit(
                    {"kind": "watermark", "segment": item.segment, "watermark": item.watermark},
                    lambda item=item: click.echo(
                        f"-- watermark {item.segment} {_time(item.watermark)}"
                    ),
                )


# --- reader groups -------------------------------------------------------------


@cli.group()
def readergroup() -> None:
    """Reader groups: list, describe, reset."""


@readergroup.command("list")
@click.argument("scope_name", metavar="SCOPE")
@pass_context
def readergroup_list(context: _Context, scope_name: str) -> None:
    """Lists the reader groups of SCOPE."""
    with _errors_as_exit_codes(context.uri):
        names = ReaderGroupManager(context.client()).list_reader_groups(scope_name)
    full = [f"{scope_name}/{name}" for name in names]
    context.emit(
        {"scope": scope_name, "readergroups": names}, lambda: _print_names(full, "no reader groups")
    )


@readergroup.command("describe")
@click.argument("name", callback=_scoped, metavar="SCOPE/GROUP")
@pass_context
def readergroup_describe(context: _Context, name: tuple[str, str]) -> None:
    """Shows a group's streams, readers, positions and watermark."""
    scope_name, group = name
    with _errors_as_exit_codes(context.uri):
        record = ReaderGroupManager(context.client()).get_reader_group(scope_name, group).record()
    state = record.state
    segments = [
        {
            "segment": s,
            "offset": c.offset,
            "end": c.end,
            "watermark": c.watermark,
            "reader": record.assignments.get(s),
        }
        for s, c in sorted(state.cursors.items())
    ]
    waiting = [
        {"segment": s, "watermark": w.watermark, "waiting_for": sorted(w.waiting_for)}
        for s, w in sorted(state.waiting.items())
    ]
    value = {
        "group": f"{scope_name}/{group}",
        "streams": list(record.streams),
        "generation": record.generation,
        "watermark": group_watermark(state),
        "readers": sorted(record.leases),
        "segments": segments,
        "waiting": waiting,
        "finished": sorted(state.finished),
        "checkpoints": sorted(record.checkpoints),
    }

    def human() -> None:
        click.echo(
            f"reader group {scope_name}/{group}: streams {', '.join(record.streams)}, "
            f"generation {record.generation}, {len(record.leases)} reader(s)"
        )
        click.echo(f"  group watermark {_watermark_text(value['watermark'])}")
        click.echo(f"  {'SEGMENT':<24} {'OFFSET':>10}  {'WATERMARK':<24} READER")
        for s in segments:
            click.echo(
                f"  {s['segment']:<24} {s['offset']:>10}  {_watermark_text(s['watermark']):<24} "
                f"{s['reader'] or '-'}"
            )
        for w in waiting:
            click.echo(f"  {w['segment']:<24} waiting for {', '.join(w['waiting_for'])}")

    context.emit(value, human)


@readergroup.command("reset")
@click.argument("name", callback=_scoped, metavar="SCOPE/GROUP")
@click.option(
    "--to",
    "to",
    default="earliest",
    show_default=True,
    help="earliest, latest, or checkpoint:NAME (a checkpoint the group completed).",
)
@pass_context
def readergroup_reset(context: _Context, name: tuple[str, str], to: str) -> None:
    """Restarts a group from a position; its current readers fail on their next read."""
    scope_name, group = name
    with _errors_as_exit_codes(context.uri):
        handle = ReaderGroupManager(context.client()).get_reader_group(scope_name, group)
        if to.startswith("checkpoint:"):
            checkpoint = to.removeprefix("checkpoint:")
            cuts = handle.record().checkpoints
            if checkpoint not in cuts:
                known = ", ".join(sorted(cuts)) or "none"
                _fail(f"no checkpoint {checkpoint!r} in {scope_name}/{group} (known: {known})", 3)
            handle.reset_to(dict(cuts[checkpoint]))
        elif to in ("earliest", "latest"):
            handle.reset_to(to)
        else:
            _fail(f"--to must be earliest, latest or checkpoint:NAME, got {to!r}", 2)
    context.emit(
        {"group": f"{scope_name}/{group}", "reset_to": to},
        lambda: click.echo(f"reader group {scope_name}/{group} reset to {to}"),
    )


# --- watermarks ----------------------------------------------------------------


def _watermark_text(ms: int) -> str:
    if ms >= END_OF_TIME:
        return "end of time"
    if ms < 0:
        return "none"
    return _time(ms)


def _print_watermarks(report: WatermarkReport) -> None:
    click.echo(f"stream {report.stream} at {_time(report.now)} (store clock)")
    click.echo(f"  {'SEGMENT':<24} {'WATERMARK':<24} {'LAG':>10}  STATE")
    for s in report.segments:
        state = "sealed" if s.sealed else ("idle" if s.idle else "active")
        click.echo(f"  {s.segment:<24} {_watermark_text(s.watermark):<24} {s.lag_ms:>8}ms  {state}")
    for g in report.groups:
        holding = f"held back by {g.holding_back}" if g.holding_back else "nothing to read"
        if g.reader:
            holding += f" (reader {g.reader})"
        click.echo(
            f"group {g.group}: watermark {_watermark_text(g.watermark)}, "
            f"lag {g.lag_ms}ms, {holding}"
        )


@cli.command("watermarks")
@click.argument("name", callback=_stream_id, metavar="SCOPE/STREAM")
@click.option(
    "--group", "groups", multiple=True, metavar="[SCOPE/]GROUP", help="Also show this reader group."
)
@click.option(
    "--idle-after-ms",
    type=click.IntRange(min=0),
    default=1_000,
    show_default=True,
    help="A segment with no write or idle tick for this long is shown idle.",
)
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), help="Draw a PNG here.")
@click.option(
    "--duration",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="With --plot: seconds to sample for.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    help="With --plot: seconds between samples.",
)
@pass_context
def watermarks_command(
    context: _Context,
    name: StreamId,
    groups: tuple[str, ...],
    idle_after_ms: int,
    plot_file: str | None,
    duration: float,
    interval: float,
) -> None:
    """How far time has progressed on SCOPE/STREAM.

    Per segment: the watermark, its lag behind now, idle or not; per --group:
    the group watermark and the segment holding it back. --plot FILE.png
    samples for --duration and draws the ingestion clock against each watermark.
    """
    with _errors_as_exit_codes(context.uri):
        if plot_file is None:
            report = watermarks(context.client(), name, groups, idle_after_ms)
            context.emit(report.to_dict(), lambda: _print_watermarks(report))
            return
        try:
            from connector.cli.plot import plot, sample
        except ImportError as error:
            _fail(f"--plot needs matplotlib (pip install '.[plot]' in a checkout): {error}", 1)
        reports = sample(context.client(), name, groups, duration, interval, idle_after_ms)
        plot(reports, plot_file)
        last = reports[-1]
        context.emit(
            {"plot": plot_file, "samples": len(reports), "last": last.to_dict()},
            lambda: (
                _print_watermarks(last),
                click.echo(f"plot of {len(reports)} samples: {plot_file}"),
            ),
        )


def main(argv: list[str] | None = None) -> None:
    """Runs the command line (the ``tidemarkctl`` console script)."""
    cli.main(args=argv, prog_name="tidemarkctl")
