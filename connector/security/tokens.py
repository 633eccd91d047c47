"""Bearer tokens: the server's token file, hashed at rest, and the rights each token holds.

The token file is TOML, one table per token::

    [[token]]
    name = "ingest"                      # shown in logs, never the token itself
    sha256 = "9f86d081884c7d659a2f..."   # hash_token(token); the token is not stored
    rights = { iot = ["read", "write"] } # scope -> rights; "*" means every scope

Tokens are random secrets of at least 128 bits (:func:`new_token` makes 256),
so one unsalted SHA-256 is a sound way to keep them at rest: there is nothing
to guess by brute force, and a call costs one hash and one dictionary look-up.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from connector.errors import InvalidArgumentError
from connector.security.rights import ANY_SCOPE, Need, Right

__all__ = ["MAX_TOKEN_CHARS", "Principal", "TokenTable", "hash_token", "new_token", "token_entry"]

_log = logging.getLogger("connector.security")

#: The smallest token the server accepts in its file's place: 16 random bytes as hex.
_MIN_TOKEN_CHARS = 32
#: The longest token a call may present (:func:`new_token` makes 43 characters); a longer
#: one is refused like any wrong token, without being hashed.
MAX_TOKEN_CHARS = 4096


def new_token() -> str:
    """A new random token (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The token's hash as the token file keeps it (hex SHA-256 of its UTF-8 bytes)."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_entry(name: str, token: str, rights: Mapping[str, Sequence[str]]) -> str:
    """The token file's entry (TOML) granting ``rights`` to ``token``, kept as its hash."""
    grants = ", ".join(
        f"{json.dumps(scope)} = {json.dumps(list(r))}" for scope, r in rights.items()
    )
    return (
        f"[[token]]\nname = {json.dumps(name)}\nsha256 = {json.dumps(hash_token(token))}\n"
        f"rights = {{ {grants} }}\n"
    )


@dataclass(frozen=True)
class Principal:
    """Who a valid token says the caller is, and what it may do."""

    name: str
    rights: Mapping[str, frozenset[Right]] = field(default_factory=dict)

    def allows(self, need: Need) -> bool:
        """Whether this principal holds ``need.right`` on ``need.scope``.

        A grant on ``*`` covers every scope; a need on ``*`` (a resource outside
        every scope) is covered only by a grant on ``*``.
        """
        for scope in (need.scope, ANY_SCOPE):
            if need.right in self.rights.get(scope, frozenset()):
                return True
        return False


def _principal(index: int, entry: object) -> tuple[str, Principal]:
    where = f"token #{index + 1}"
    if not isinstance(entry, dict):
        msg = f"{where}: expected a table, got {entry!r}"
        raise InvalidArgumentError(msg)
    name = entry.get("name")
    digest = entry.get("sha256")
    grants = entry.get("rights", {})
    if not isinstance(name, str) or not name:
        msg = f"{where}: 'name' must be a non-empty string, got {name!r}"
        raise InvalidArgumentError(msg)
    where = f"token {name!r}"
    if not (isinstance(digest, str) and len(digest) == 64 and _is_hex(digest)):
        msg = f"{where}: 'sha256' must be 64 hex digits (hash_token's output), got {digest!r}"
        raise InvalidArgumentError(msg)
    if not isinstance(grants, dict):
        msg = f"{where}: 'rights' must map scopes to lists of rights, got {grants!r}"
        raise InvalidArgumentError(msg)
    rights: dict[str, frozenset[Right]] = {}
    for scope, names in grants.items():
        if not isinstance(names, list):
            msg = f"{where}: rights on {scope!r} must be a list, got {names!r}"
            raise InvalidArgumentError(msg)
        try:
            rights[scope] = frozenset(Right(n) for n in names)
        except ValueError:
            known = ", ".join(r.value for r in Right)
            msg = f"{where}: rights on {scope!r} must be among {known}, got {names!r}"
            raise InvalidArgumentError(msg) from None
    return digest.lower(), Principal(name, MappingProxyType(rights))


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def _parse(path: Path) -> dict[str, Principal]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        msg = f"cannot read token file {str(path)!r}: {error.strerror}"
        raise InvalidArgumentError(msg) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        msg = f"token file {str(path)!r} is not valid TOML: {error}"
        raise InvalidArgumentError(msg) from None
    entries = data.get("token", [])
    if not isinstance(entries, list):
        msg = f"token file {str(path)!r}: expected [[token]] tables, got {entries!r}"
        raise InvalidArgumentError(msg)
    table: dict[str, Principal] = {}
    for index, entry in enumerate(entries):
        digest, principal = _principal(index, entry)
        if digest in table:
            names = f"{table[digest].name!r} and {principal.name!r}"
            msg = f"token file {str(path)!r}: tokens {names} are the same token"
            raise InvalidArgumentError(msg)
        table[digest] = principal
    return table


class TokenTable:
    """The server's tokens, read from a file and reloaded on request (SIGHUP).

    Thread-safe: :meth:`principal` sees either the old table or the new one whole.
    A reload that fails keeps the old table and raises.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._table = _parse(self.path)
        self._lock = threading.Lock()

    def reload(self) -> int:
        """Reads the file again; returns how many tokens it holds now."""
        table = _parse(self.path)
        with self._lock:
            self._table = table
        _log.info("token file reloaded: %d token(s)", len(table))
        return len(table)

    def principal(self, token: str) -> Principal | None:
        """The principal of a presented token, or None when it is not in the file."""
        if not _MIN_TOKEN_CHARS <= len(token) <= MAX_TOKEN_CHARS:
            return None
        return self._table.get(hash_token(token))

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        return f"TokenTable(path={str(self.path)!r}, tokens={len(self._table)})"
