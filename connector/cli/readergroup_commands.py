"""``tidemarkctl readergroup``: list, describe and reset reader groups."""

from __future__ import annotations

import click

from connector.cli.app import Failure, Settings, Shown, TidemarkctlGroup
from connector.cli.params import SCOPED_NAME
from connector.cli.scope_commands import names_shown
from connector.cli.watermark_commands import watermark_text
from connector.reader.group import ReaderGroupManager
from connector.reader.group_state import group_watermark

__all__ = ["readergroup"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)


@click.group(cls=TidemarkctlGroup)
def readergroup() -> None:
    """Reader groups: list, describe, reset."""


@readergroup.command("list")
@click.argument("scope_name", metavar="SCOPE")
@pass_settings
def readergroup_list(settings: Settings, scope_name: str) -> Shown:
    """Lists the reader groups of SCOPE."""
    names = ReaderGroupManager(settings.client()).list_reader_groups(scope_name)
    full = [f"{scope_name}/{name}" for name in names]
    return names_shown({"scope": scope_name, "readergroups": names}, full, "no reader groups")


@readergroup.command("describe")
@click.argument("name", type=SCOPED_NAME, metavar="SCOPE/GROUP")
@pass_settings
def readergroup_describe(settings: Settings, name: tuple[str, str]) -> Shown:
    """Shows a group's streams, readers, positions and watermark."""
    scope_name, group = name
    record = ReaderGroupManager(settings.client()).get_reader_group(scope_name, group).record()
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
    lines = [
        f"reader group {scope_name}/{group}: streams {', '.join(record.streams)}, "
        f"generation {record.generation}, {len(record.leases)} reader(s)",
        f"  group watermark {watermark_text(value['watermark'])}",
        f"  {'SEGMENT':<24} {'OFFSET':>10}  {'WATERMARK':<24} READER",
    ]
    for s in segments:
        lines.append(
            f"  {s['segment']:<24} {s['offset']:>10}  {watermark_text(s['watermark']):<24} "
            f"{s['reader'] or '-'}"
        )
    for w in waiting:
        lines.append(f"  {w['segment']:<24} waiting for {', '.join(w['waiting_for'])}")
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
