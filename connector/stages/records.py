"""Stage links in the store: recorded when a job starts, read by ``tidemarkctl pipeline``."""

from __future__ import annotations

from connector.client import StoreClient
from connector.errors import FailedPreconditionError, OutcomeUnknownError
from connector.stages.link import StageLink, stage_key

__all__ = ["forget_stage", "read_stages", "record_stage"]

_CAS_ATTEMPTS = 20


def record_stage(client: StoreClient, link: StageLink) -> bool:
    """Keeps ``link`` under its key, replacing an older link of the same stage.

    Returns whether it wrote (False: that very link was stored already, so
    a job recording its link at every start or batch costs one read).
    Durable on return. Needs ``read`` on the output stream's scope.

    Raises:
        FailedPreconditionError: too many concurrent updates in a row.
    """
    value = link.to_json()
    for _ in range(_CAS_ATTEMPTS):
        current = client.get_state(link.key)
        if current.revision and current.value == value:
            return False
        try:
            written, _ = client.compare_and_set_state(link.key, current.revision, value)
        except OutcomeUnknownError:
            continue  # looked at again: the link stored, or not
        if written:
            return True
    msg = f"stage {link.name!r}: {_CAS_ATTEMPTS} conflicting updates of {link.key!r} in a row"
    raise FailedPreconditionError(msg)


def read_stages(client: StoreClient, scope: str) -> list[StageLink]:
    """Every stage link kept in ``scope``, by name (a link removed meanwhile is left out)."""
    prefix = stage_key(scope, "")
    links = []
    for key in client.list_state_keys(prefix):
        stored = client.get_state(key)
        if stored.revision:
            links.append(StageLink.from_json(stored.value))
    return sorted(links, key=lambda link: link.name)


def forget_stage(client: StoreClient, scope: str, name: str) -> bool:
    """Removes stage ``name``'s link from ``scope``; returns whether there was one.

    A job records its link again when it next starts (or, on Spark, commits a batch).

    Raises:
        FailedPreconditionError: too many concurrent updates in a row.
    """
    key = stage_key(scope, name)
    for _ in range(_CAS_ATTEMPTS):
        current = client.get_state(key)
        if current.revision == 0:
            return False
        try:
            deleted, _ = client.delete_state(key, current.revision)
        except OutcomeUnknownError:
            continue
        if deleted:
            return True
    msg = f"stage {name!r}: {_CAS_ATTEMPTS} conflicting updates of {key!r} in a row"
    raise FailedPreconditionError(msg)
