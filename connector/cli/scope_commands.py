"""``tidemarkctl scope``: the namespaces streams live in."""

from __future__ import annotations

import click

from connector.cli.app import Settings, Shown, TidemarkctlGroup
from connector.client import StreamManager
from connector.errors import AlreadyExistsError, NotFoundError

__all__ = ["names_shown", "scope"]

pass_settings = click.make_pass_decorator(Settings, ensure=True)


def names_shown(value: dict[str, object], names: list[str], empty: str) -> Shown:
    """``value``, or one name a line for people (``(empty)`` on stderr when there are none)."""
    return Shown(value, "\n".join(names), "" if names else f"({empty})")


@click.group(cls=TidemarkctlGroup)
def scope() -> None:
    """Scopes: the namespaces streams live in."""


@scope.command("create")
@click.argument("name")
@click.option("--if-not-exists", is_flag=True, help="An existing scope is not an error.")
@pass_settings
def scope_create(settings: Settings, name: str, if_not_exists: bool) -> Shown:
    """Creates scope NAME."""
    try:
        StreamManager(settings.client()).create_scope(name)
    except AlreadyExistsError:
        if not if_not_exists:
            raise
        return Shown({"scope": name, "created": False}, f"scope {name} exists already")
    return Shown({"scope": name, "created": True}, f"scope {name} created")


@scope.command("delete")
@click.argument("name")
@click.option("--if-exists", is_flag=True, help="A scope that does not exist is not an error.")
@pass_settings
def scope_delete(settings: Settings, name: str, if_exists: bool) -> Shown:
    """Deletes scope NAME, which must have no streams (sealed ones too) and no reader groups."""
    try:
        StreamManager(settings.client()).delete_scope(name)
    except NotFoundError:
        if not if_exists:
            raise
        return Shown({"deleted": name, "existed": False}, f"scope {name} does not exist")
    return Shown({"deleted": name, "existed": True}, f"scope {name} deleted")


@scope.command("list")
@pass_settings
def scope_list(settings: Settings) -> Shown:
    """Lists every scope (needs read on every scope)."""
    names = StreamManager(settings.client()).list_scopes()
    return names_shown({"scopes": names}, names, "no scopes")
