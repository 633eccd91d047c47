"""``tidemarkctl data-dir``: check a stopped file store's data dir for damage, and repair it.

Both work on the files, with no server running on them (they take the data
dir's lock); ``--uri`` plays no part. ``check`` changes nothing: it says
what is damaged and what it costs, and exits 0 when nothing is (a torn tail,
which every start cuts, is no damage), 8 when something is. ``repair``
salvages what can be proved (see :mod:`connector.store.file.salvage`).
"""

from __future__ import annotations

import click

from connector.cli.app import EXIT_DATA_LOSS, Failure, Settings, Shown, TidemarkctlGroup
from connector.store.file.salvage import Findings, check, repair

__all__ = ["data_dir"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)

_DIR = click.Path(exists=True, file_okay=False)


@click.group("data-dir", cls=TidemarkctlGroup)
def data_dir() -> None:
    """A stopped file store's data dir: check it for damage, repair it."""


def _shown(settings: Settings, findings: Findings) -> Shown:
    return Shown(findings.as_dict(), "\n".join(findings.lines()))


@data_dir.command("check")
@click.argument("directory", metavar="DIR", type=_DIR)
@pass_settings
def data_dir_check(settings: Settings, directory: str) -> Shown:
    """Says what is damaged in DIR and what it costs; changes nothing (exit 8: damage found)."""
    findings = check(directory)
    if findings.damaged:
        shown = _shown(settings, findings)
        settings.emit(shown.value, shown.text)
        count = len(findings.damage)
        msg = (
            f"{count} damaged stretch{'es' if count > 1 else ''} in {directory!r}: "
            f"'tidemarkctl data-dir repair {directory}' keeps what can be proved"
        )
        raise Failure(msg, EXIT_DATA_LOSS, "DataDirDamagedError")
    return _shown(settings, findings)


@data_dir.command("repair")
@click.argument("directory", metavar="DIR", type=_DIR)
@pass_settings
def data_dir_repair(settings: Settings, directory: str) -> Shown:
    """Salvages DIR's intact journal records and the appends its data files prove.

    Writes a new journal (the damaged one is kept beside it as
    journal.log.damaged-TIME); changes no data file. Damaged events inside a
    data file stay: reads answer DATA_LOSS there, naming where their append
    ends.
    """
    return _shown(settings, repair(directory))
