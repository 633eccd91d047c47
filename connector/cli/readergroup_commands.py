"""``tidemarkctl readergroup``: create, list, describe, reset and delete reader groups."""

from __future__ import annotations

import click

from connector.cli.app import Failure, Settings, Shown, TidemarkctlGroup
from connector.cli.params import SCOPED_NAME
from connector.cli.scope_commands import names_shown
from connector.cli.watermark_commands import delay_text, progress_text, watermark_text
from connector.cli.watermarks import group_view, server_now
from connector.errors import AlreadyExistsError, NotFoundError
from connector.groups.progress import delay_ms
from connector.groups.state import group_watermark
from connector.reader.group import ReaderGroupManager

__all__ = ["readergroup"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)


@click.group(cls=TidemarkctlGroup)
def readergroup() -> None:
    """Reader groups: create, list, describe, reset, delete."""


@readergroup.command("list")
@click.argument("scope_name", metavar="SCOPE")
@pass_settings
def readergroup_list(settings: Settings, scope_name: str) -> Shown:
    """Lists the reader groups of SCOPE."""
    names = ReaderGroupManager(settings.client()).list_reader_groups(scope_name)
    full = [f"{scope_name}/{name}" for name in names]
    return names_shown({"scope": scope_name, "readergroups": names}, full, "no reader groups")


@readergroup.command("create")
@click.argument("name", type=SCOPED_NAME, metavar="SCOPE/GROUP")
@click.option(
    "--stream",
    "streams",
    multiple=True,
    required=True,
    metavar="SCOPE/STREAM",
    help="A stream the group reads; repeatable.",
)
@click.option(
    "--start",
    type=click.Choice(["earliest", "latest"]),
    default="earliest",
    show_default=True,
    help="Where the group starts: the first readable events, or the tails.",
)
@click.option(
    "--if-not-exists",
    is_flag=True,
    help="An existing group is not an error (it is left as it is).",
)
@pass_settings
def readergroup_create(
    settings: Settings,
    name: tuple[str, str],
    streams: tuple[str, ...],
    start: str,
    if_not_exists: bool,
) -> Shown:
    """Creates reader group SCOPE/GROUP over the --stream streams."""
    scope_name, group = name
    manager = ReaderGroupManager(settings.client())
    created = True
    try:
        manager.create_reader_group(scope_name, group, list(streams), start=start)
    except AlreadyExistsError:
        if not if_not_exists:
            raise
        created = False
    value = {"group": f"{scope_name}/{group}", "streams": list(streams), "created": created}
    text = f"reader group {scope_name}/{group} {'created' if created else 'exists already'}"
    return Shown(value, text)


@readergroup.command("delete")
@click.argument("name", type=SCOPED_NAME, metavar="SCOPE/GROUP")
@click.option("--if-exists", is_flag=True, help="A group that does not exist is not an error.")
@pass_settings
def readergroup_delete(settings: Settings, name: tuple[str, str], if_exists: bool) -> Shown:
    """Deletes reader group SCOPE/GROUP; its readers fail on their next read."""
    scope_name, group = name
    try:
        ReaderGroupManager(settings.client()).delete_reader_group(scope_name, group)
    except NotFoundError:
        if not if_exists:
            raise
        value = {"deleted": f"{scope_name}/{group}", "existed": False}
        return Shown(value, f"reader group {scope_name}/{group} does not exist")
    value = {"deleted": f"{scope_name}/{group}", "existed": True}
    return Shown(value, f"reader group {scope_name}/{group} deleted")


@readergroup.command("describe")
@click.argument("name", type=SCOPED_NAME, metavar="SCOPE/GROUP")
@pass_settings
def readergroup_describe(settings: Settings, name: tuple[str, str]) -> Shown:
    """Shows a group's readers, its watermarks, and per segment its position and unread events.

    Like kafka-consumer-groups --describe: OFFSET is where the group reads
    next, TAIL the segment's end now (LOG-END-OFFSET), UNREAD the events
    between them; PROCESSING-TIME the segment's processing-time watermark
    (the ingestion time of its oldest unread event - 1, or its watermark
    with nothing unread) and DELAY how far that is behind the store's
    clock. The same figures, by the same rules, as ``tidemarkctl
    watermarks`` and the server's metrics (see the glossary).
    """
    scope_name, group = name
    client = settings.client()
    now = server_now(client, scope_name)
    view = group_view(client, scope_name, group, now)
    record, state = view.record, view.record.state
    segments = [
        {
            "segment": s.segment,
            "offset": s.offset,
            "tail": s.tail,
            "unread_events": s.events,
            "end": state.cursors[s.segment].end if s.segment in state.cursors else None,
            "watermark": s.watermark,
            "processing_time_watermark": s.processing_time_watermark,
            "processing_time_delay_ms": delay_ms(now, s.processing_time_watermark),
            "reader": s.reader,
            "waiting_for": list(s.waiting_for),
        }
        for s in view.lag.segments
    ]
    mark = group_watermark(state)
    value = {
        "group": view.name,
        "streams": list(record.streams),
        "generation": record.generation,
        "now": now,
        "watermark": mark,
        "delay_ms": delay_ms(now, mark),
        **view.progress.to_dict(),
        "readers": sorted(record.leases),
        "segments": segments,
        "finished": sorted(state.finished),
        "checkpoints": sorted(record.checkpoints),
    }
    lines = [
        f"reader group {view.name}: streams {', '.join(record.streams)}, "
        f"generation {record.generation}, {len(record.leases)} reader(s)",
        f"  group watermark {watermark_text(mark)} (delay {delay_text(value['delay_ms'])})",
        progress_text(view.progress),
        f"  {'SEGMENT':<24} {'OFFSET':>10} {'TAIL':>10} {'UNREAD':>8}  "
        f"{'PROCESSING-TIME':<24} {'DELAY':>10}  READER",
    ]
    for s in segments:
        reader = s["reader"] or (
            f"waiting for {', '.join(s['waiting_for'])}" if s["waiting_for"] else "-"
        )
        lines.append(
            f"  {s['segment']:<24} {s['offset']:>10} {s['tail']:>10} {s['unread_events']:>8}  "
            f"{watermark_text(s['processing_time_watermark']):<24} "
            f"{delay_text(s['processing_time_delay_ms']):>10}  {reader}"
        )
    return Shown(value, "\n".join(lines))


@readergroup.command("reset")
@click.argument("name", type=SCOPED_NAME, metavar="SCOPE/GROUP")
@click.option(
    "--to",
    "to",
    default="earliest",
    show_default=True,
    help="earliest, latest, or checkpoint:NAME (a checkpoint the group completed).",
)
@pass_settings
def readergroup_reset(settings: Settings, name: tuple[str, str], to: str) -> Shown:
    """Restarts a group from a position; its current readers fail on their next read."""
    scope_name, group = name
    if not to.startswith("checkpoint:") and to not in ("earliest", "latest"):
        msg = f"--to must be earliest, latest or checkpoint:NAME, got {to!r}"
        raise click.UsageError(msg)
    handle = ReaderGroupManager(settings.client()).get_reader_group(scope_name, group)
    if to.startswith("checkpoint:"):
        checkpoint = to.removeprefix("checkpoint:")
        cuts = handle.record().checkpoints
        if checkpoint not in cuts:
            known = ", ".join(sorted(cuts)) or "none"
            msg = f"no checkpoint {checkpoint!r} in {scope_name}/{group} (known: {known})"
            raise Failure(msg, 3, "NotFoundError")
        handle.reset_to(dict(cuts[checkpoint]))
    else:
        handle.reset_to(to)
    return Shown(
        {"group": f"{scope_name}/{group}", "reset_to": to},
        f"reader group {scope_name}/{group} reset to {to}",
    )
