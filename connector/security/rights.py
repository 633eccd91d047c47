"""Who may do what: the right each call needs, on which scope. Pure functions.

Every resource of the store lives under a scope: streams (``scope/stream``),
segments (``scope/stream/N``), the writer ids of a segment's appends, and
state keys, which are named ``kind/scope/...`` (reader groups keep theirs
under ``readergroup/scope/group``). A right on a scope covers all of them;
a right on ``*`` covers every scope.

- ``read``: describe and list streams, read segments and their watermarks,
  take part in a reader group (read, compare-and-set and delete its state,
  list the scope's groups); listing every scope needs ``read`` on ``*``, since it
  names scopes of every tenant;
- ``write``: append events (and so learn a writer's next event number) and
  assert event time (or mark a writer idle) on a stream;
- ``manage``: create and delete scopes, create streams, scale, seal, truncate
  and delete them.

Deleting a reader group (its state) needs ``read``, as every other change of
the group's state does: whoever takes part in a group can reset it anyway.

A call of many items (``DescribeTails``, ``ReadSegments``, ``PlanReads``)
needs the right on the scope of each item it names, as the call for that
item alone would (:func:`needs_of`); one that names none touches nothing
and needs only a valid token (a fetch session's later calls read only what
its caller named before, and the server checks the caller's right again on
every segment it answers with).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connector._proto import store_pb2 as _pb
from connector.errors import InvalidArgumentError
from connector.names import state_key_scope

__all__ = [
    "ANY_SCOPE",
    "Need",
    "Right",
    "need_of",
    "needs_of",
    "needs_token",
    "parse_grant",
    "scope_of_state_key",
]

_STORE_SERVICE = _pb.DESCRIPTOR.services_by_name["SegmentStore"].full_name

#: A scope name in a grant that stands for every scope.
ANY_SCOPE = "*"


class Right(enum.Enum):
    """One of the three rights a token holds on a scope."""

    READ = "read"
    WRITE = "write"
    MANAGE = "manage"


@dataclass(frozen=True)
class Need:
    """The right a call needs and the scope it needs it on (``*``: every scope)."""

    right: Right
    scope: str


# Method name (the last part of the gRPC path) -> (right, request field naming the resource,
# how that field's value names its scope).
_RULES: Mapping[str, tuple[Right, str, str]] = {
    "CreateScope": (Right.MANAGE, "scope", "scope"),
    "CreateStream": (Right.MANAGE, "scope", "scope"),
    "ScaleStream": (Right.MANAGE, "scope", "scope"),
    "SealStream": (Right.MANAGE, "scope", "scope"),
    "DeleteStream": (Right.MANAGE, "scope", "scope"),
    "DeleteScope": (Right.MANAGE, "scope", "scope"),
    "TruncateStream": (Right.MANAGE, "scope", "scope"),
    "DescribeStream": (Right.READ, "scope", "scope"),
    "AppendEvents": (Right.WRITE, "segment", "segment"),
    "AssertWatermark": (Right.WRITE, "scope", "scope"),
    "ReadSegment": (Right.READ, "segment", "segment"),
    "GetSegmentInfo": (Right.READ, "segment", "segment"),
    "PlanRead": (Right.READ, "segment", "segment"),
    "GetState": (Right.READ, "key", "state"),
    "CompareAndSetState": (Right.READ, "key", "state"),
    "DeleteState": (Right.READ, "key", "state"),
    "ListScopes": (Right.READ, "", "every"),
    "ListStreams": (Right.READ, "scope", "scope"),
    "ListStateKeys": (Right.READ, "prefix", "state"),
}


# Calls of many items: method -> (right, the segment or stream names of a request's items,
# how each names its scope).
_MANY_RULES: Mapping[str, tuple[Right, Callable[[Any], Iterable[str]], str]] = {
    "DescribeTails": (Right.READ, lambda r: (s.scope for s in r.streams), "scope"),
    "ReadSegments": (
        Right.READ,
        lambda r: [*(c.segment for c in r.cursors), *r.released],
        "segment",
    ),
    "PlanReads": (Right.READ, lambda r: (p.segment for p in r.plans), "segment"),
}


def parse_grant(text: str) -> tuple[str, tuple[str, ...]]:
    """``(scope, rights)`` of a grant written ``SCOPE=RIGHT[,RIGHT...]`` (``iot=read,write``).

    Raises:
        InvalidArgumentError: ``text`` has another shape or names an unknown right.
    """
    scope, _, rights = text.partition("=")
    names = tuple(r.strip() for r in rights.split(",") if r.strip())
    known = sorted(r.value for r in Right)
    if not scope or not names or not set(names) <= set(known):
        msg = f"expected SCOPE=RIGHT[,RIGHT...] with rights among {known}, got {text!r}"
        raise InvalidArgumentError(msg)
    return scope, names


def scope_of_state_key(key: str) -> str:
    """The scope a state key belongs to (:func:`~connector.names.state_key_scope`).

    A key of another shape belongs to no scope, so only a grant on ``*`` covers it.
    """
    return state_key_scope(key) or ANY_SCOPE


def needs_token(method: str) -> bool:
    """Whether ``method`` (a gRPC method path) is of the store's service, so needs a token."""
    service, _, _ = method.rpartition("/")
    return not service or service.lstrip("/") == _STORE_SERVICE


def need_of(method: str, request: Any) -> Need | None:
    """The right ``method`` (a gRPC method path or name) of one item needs for ``request``.

    None for a method outside the store's service (health checks, reflection),
    which needs no right. A method of the store that has no rule here needs
    ``manage`` on every scope, so a new call is closed until it is given a rule.
    For a call of many items, the first of :func:`needs_of` (None: it names none).
    """
    needs = needs_of(method, request)
    return needs[0] if needs else None


def needs_of(method: str, request: Any) -> tuple[Need, ...]:
    """Every right ``method`` needs for ``request``, each scope once; empty: none.

    A call of many items needs the right on the scope of each item it names
    (none when it names none); a call of one, the one :func:`need_of` says.
    """
    if not needs_token(method):
        return ()
    name = method.rpartition("/")[2]
    many = _MANY_RULES.get(name)
    if many is not None:
        right, names, kind = many
        scopes = dict.fromkeys(_scope(kind, str(value)) for value in names(request))
        return tuple(Need(right, scope) for scope in scopes)
    rule = _RULES.get(name)
    if rule is None:
        return (Need(Right.MANAGE, ANY_SCOPE),)
    right, field, kind = rule
    value = str(getattr(request, field, "")) if field else ""
    return (Need(right, _scope(kind, value)),)


def _scope(kind: str, value: str) -> str:
    """The scope a request field's ``value`` names, by the rule's ``kind``."""
    if kind == "every":
        scope = ANY_SCOPE
    elif kind == "scope":
        scope = value
    elif kind == "segment":
        scope = value.split("/", 1)[0]
    else:
        scope = scope_of_state_key(value)
    return scope or ANY_SCOPE
