"""``tidemarkctl readergroup``: create, list, describe, reset and delete reader groups."""

from __future__ import annotations

import click

from connector.cli.app import Failure, Settings, Shown, TidemarkctlGroup
from connector.cli.params import SCOPED_NAME
from connector.cli.scope_commands import names_shown
from connector.cli.watermark_commands import watermark_text
from connector.errors import AlreadyExistsError, NotFoundError
from connector.groups.lag import group_lag
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


def _lag_text(ms: int) -> str:
    return f"{ms}ms" if ms else "0"


@readergroup.command("describe")
@click.argument("name", type=SCOPED_NAME, metavar="SCOPE/GROUP")
@pass_settings
def readergroup_describe(settings: Settings, name: tuple[str, str]) -> Shown:
    """Shows a group's readers, and per segment its position, the tail and the lag.

    Like kafka-consumer-groups --describe: OFFSET is where the group reads
    next, TAIL the segment's end now (LOG-END-OFFSET), LAG the events
    between them, LAG-MS the ingestion time those events span.
    """
    scope_name, group = name
    client = settings.client()
    record = ReaderGroupManager(client).get_reader_group(scope_name, group).record()
    state = record.state
    lag = group_lag(record, client.plan_read)
    watermark_at = {s: c.watermark for s, c in state.cursors.items()}
    watermark_at.update({s: w.watermark for s, w in state.waiting.items()})
    segments = [
        {
            "segment": s.segment,
            "offset": s.offset,
            "tail": s.tail,
            "lag": s.events,
            "lag_ms": s.lag_ms,
            "end": state.cursors[s.segment].end if s.segment in state.cursors else None,
            "watermark": watermark_at[s.segment],
            "reader": s.reader,
            "waiting_for": list(s.waiting_for),
        }
        for s in lag.segments
    ]
    value = {
        "group": f"{scope_name}/{group}",
        "streams": list(record.streams),
        "generation": record.generation,
        "watermark": group_watermark(state),
        "lag": lag.events,
        "lag_ms": lag.lag_ms,
        "readers": sorted(record.leases),
        "segments": segments,
        "finished": sorted(state.finished),
        "checkpoints": sorted(record.checkpoints),
    }
    lines = [
        f"reader group {scope_name}/{group}: streams {', '.join(record.streams)}, "
        f"generation {record.generation}, {len(record.leases)} reader(s)",
        f"  group watermark {watermark_text(value['watermark'])}, "
        f"lag {lag.events} events, {_lag_text(lag.lag_ms)}",
        f"  {'SEGMENT':<24} {'OFFSET':>10} {'TAIL':>10} {'LAG':>8} {'LAG-MS':>9}  "
        f"{'WATERMARK':<24} READER",
    ]
    for s in segments:
        reader = s["reader"] or (
            f"waiting for {', '.join(s['waiting_for'])}" if s["waiting_for"] else "-"
        )
        lines.append(
            f"  {s['segment']:<24} {s['offset']:>10} {s['tail']:>10} {s['lag']:>8} "
            f"{_lag_text(s['lag_ms']):>9}  {watermark_text(s['watermark']):<24} {reader}"
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
